"""Reductions, end to end: compiled by the backend under test, compared with eager."""
import pytest
import torch
from torch.testing import make_tensor

from helpers import check_compiled

SHAPE = (4, 7, 13)
# (dim, keepdim) cases over SHAPE: single, negative, several, all.
DIMS = [0, 1, -1, (0, 2), (-1, -3), (0, 1, 2), None]


def dim_id(d):
    return "all" if d is None else str(d).replace(" ", "")


def rand(shape, dtype=torch.float32, low=-3.0, high=3.0):
    if dtype == torch.bool:
        return make_tensor(shape, dtype=dtype, device="cpu")
    return make_tensor(shape, dtype=dtype, device="cpu", low=low, high=high)


def reduce(op, x, dim, keepdim):
    if dim is None:
        return op(x)  # all dims; keepdim has no all-dims form for every op
    return op(x, dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=dim_id)
@pytest.mark.parametrize("op", [torch.sum, torch.mean, torch.amax, torch.amin],
                         ids=lambda f: f.__name__)
def test_reduce(op, dim, keepdim):
    check_compiled(lambda x: reduce(op, x, dim, keepdim), rand(SHAPE))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1, 1, None], ids=dim_id)
def test_prod(dim, keepdim):
    # prod takes one dim at most; values near 1 keep the product in range.
    x = rand(SHAPE, low=0.6, high=1.4) * torch.where(torch.rand(SHAPE) < 0.3, -1.0, 1.0)
    fn = (lambda a: a.prod()) if dim is None else (lambda a: a.prod(dim, keepdim=keepdim))
    check_compiled(fn, x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dim", [-1, (0, 2), None], ids=dim_id)
def test_reduce_dtypes(dim, dtype):
    x = rand(SHAPE, dtype)
    tol = {torch.float16: dict(rtol=5e-3, atol=5e-3),
           torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}.get(dtype, {})
    check_compiled(lambda a: (reduce(torch.sum, a, dim, False), reduce(torch.mean, a, dim, True),
                              reduce(torch.amax, a, dim, False)), x, **tol)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.uint8], ids=str)
@pytest.mark.parametrize("dim", [-1, (0, 1), None], ids=dim_id)
def test_sum_int_bool(dim, dtype):
    x = rand(SHAPE, dtype, -50, 50) if dtype.is_signed else rand(SHAPE, dtype, 0, 200)
    # Integer and bool sums accumulate and return int64.
    check_compiled(lambda a: (reduce(torch.sum, a, dim, False), reduce(torch.sum, a, dim, True)), x)
    if dtype != torch.bool:
        check_compiled(lambda a: (reduce(torch.amax, a, dim, False), reduce(torch.amin, a, dim, False)), x)
    if dtype != torch.bool and dim != (0, 1):
        check_compiled(lambda a: a.prod() if dim is None else a.prod(dim), x.clamp(-2, 2))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("op", [torch.argmax, torch.argmin], ids=lambda f: f.__name__)
def test_arg_reduce_ties(op, dim, keepdim):
    # Few distinct values, so every row has ties; the first index must win.
    x = rand(SHAPE, torch.float32, -2, 2).round()
    fn = (lambda a: op(a)) if dim is None else (lambda a: op(a, dim=dim, keepdim=keepdim))
    check_compiled(fn, x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_arg_reduce_int(dtype):
    x = rand(SHAPE, dtype, -3, 3)
    check_compiled(lambda a: (a.argmax(-1), a.argmin(0), a.argmax()), x)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_indices(op):
    x = rand(SHAPE).round()
    check_compiled(lambda a: getattr(torch, op)(a, dim=1), x)
    check_compiled(lambda a: tuple(getattr(torch, op)(a, dim=-1, keepdim=True)), x)


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dim", [-1, 0, (0, 2), None], ids=dim_id)
@pytest.mark.parametrize("op", [torch.var, torch.std], ids=lambda f: f.__name__)
def test_var_std(op, dim, correction):
    x = rand(SHAPE) + 10.0  # an offset catches the naive sum-of-squares formula
    check_compiled(lambda a: (op(a, dim=dim, correction=correction),
                              op(a, dim=dim, correction=correction, keepdim=True)), x)


def test_var_mean():
    check_compiled(lambda a: torch.var_mean(a, dim=-1, correction=1), rand(SHAPE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax], ids=lambda f: f.__name__)
def test_softmax(op, dim, dtype):
    x = rand(SHAPE, dtype, -10, 10)
    tol = dict(rtol=1.6e-2, atol=1.6e-2) if dtype == torch.bfloat16 else {}
    check_compiled(lambda a: op(a, dim), x, **tol)


def test_softmax_large_and_inf():
    x = rand((5, 13), low=-100, high=100) * 10  # overflows exp without the max subtraction
    x[1, 3] = float("-inf")                     # masked position
    x[2, :] = float("-inf")                     # fully masked row gives NaN
    check_compiled(lambda a: (torch.softmax(a, -1), torch.log_softmax(a, -1)), x)


def test_softmax_dtype_arg():
    x = rand(SHAPE, torch.float16)
    check_compiled(lambda a: torch.softmax(a, -1, dtype=torch.float32), x)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [-1, 0, (0, 2)], ids=dim_id)
def test_logsumexp(dim, keepdim):
    x = rand(SHAPE, low=-50, high=50)
    x[0, 0, 0] = float("-inf")
    check_compiled(lambda a: torch.logsumexp(a, dim, keepdim=keepdim), x)


# Sizes 1 and primes, and a reduction long enough for accumulation order to matter.
ODD_SHAPES = [(5, 1), (1, 1), (1,), (3, 127), (127,), (7, 13), (13, 7), (2, 4099), (1, 127, 1)]


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_reduce_odd_sizes(shape):
    x = rand(shape)
    check_compiled(lambda a: (a.sum(-1), a.mean(-1, keepdim=True), a.amax(-1), a.amin(0),
                              a.argmax(-1), torch.softmax(a, -1), a.var(-1, correction=0),
                              a.sum()), x)


@pytest.mark.parametrize("op", [torch.amax, torch.amin], ids=lambda f: f.__name__)
def test_reduce_nan_propagates(op):
    x = rand(SHAPE)
    x[0, 3, 5] = float("nan")
    x[2, :, 0] = float("nan")
    x[3, 1, 2] = float("inf")
    check_compiled(lambda a: (op(a, -1), op(a, 0), op(a, (1, 2)), op(a)), x)


def test_max_argmax_nan():
    x = rand(SHAPE)
    x[1, 2, 3] = float("nan")
    x[0, 4, 0] = float("nan")
    check_compiled(lambda a: (torch.max(a, -1), a.argmax(-1), torch.min(a, 1), a.argmin(1)), x)


def test_sum_nan_and_inf():
    x = rand(SHAPE)
    x[0, 0, 0] = float("nan")
    x[1, 1, 1] = float("inf")
    x[1, 1, 2] = float("-inf")
    x[2, 2, 2] = float("inf")
    check_compiled(lambda a: (a.sum(-1), a.mean(0), a.prod(1)), x)


def test_reduction_fused_with_pointwise():
    def fn(x, w):
        y = (x * w).relu() + 1.0
        s = y.sum(-1, keepdim=True)
        return y / s, (y - y.mean(-1, keepdim=True)).square().mean(-1), s.squeeze(-1).exp().log()
    check_compiled(fn, rand(SHAPE), rand((13,)))


def test_two_reductions_same_input():
    check_compiled(lambda a: (a.sum(0), a.sum(-1), a.amax(1), a.mean()), rand(SHAPE))


def _tol(dtype):
    return {torch.float16: dict(rtol=5e-3, atol=5e-3)}.get(dtype, {})


# Reductions whose input is contiguous along a kept dim run as vector reductions
# (the kept dim vectorized, the reduced dims looped outside): channels-last
# spatial means, column sums, NaN-propagating column max/min, f16 results.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_vector_reductions(dtype):
    x = torch.randn(4, 24, 9, 7, dtype=dtype).to(memory_format=torch.channels_last)
    check_compiled(lambda t: torch.relu(t).mean((-1, -2), keepdim=True), x, **_tol(dtype))
    m = torch.randn(37, 64, dtype=dtype)
    m[5, 3] = float("nan")
    check_compiled(lambda t: (t.sum(0), t.amax(0), t.amin(0), (t * 2).sum(0, keepdim=True) + 1), m, **_tol(dtype))
    b = torch.rand(50, 40) > 0.5
    check_compiled(lambda t: (t.any(0), t.all(0)), b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool], ids=str)
def test_cumulative(dtype):
    if dtype == torch.bool:
        x = torch.rand(5, 7, 11) > 0.5
    elif dtype.is_floating_point:
        x = torch.randn(5, 7, 11, dtype=dtype)
    else:
        x = torch.randint(-3, 4, (5, 7, 11), dtype=dtype)
    for dim in (0, 1, -1):
        check_compiled(lambda t: torch.cumsum(t, dim), x)
        check_compiled(lambda t: torch.cumsum(t, dim) * 2 + 1, x)
    if dtype.is_floating_point:
        check_compiled(lambda t: torch.cumprod(t * 0.5 + 1, 1), x)
    # the position-id pattern of transformers: cumsum of a mask, then used as an index
    mask = torch.ones(3, 9, dtype=torch.long)
    check_compiled(lambda m: (torch.cumsum(m, -1) - 1).clamp(min=0), mask)


# Long reductions in kernels with few rows run in chunks across threads
# (split_reductions): full sums, BatchNorm statistics over N*H*W (channels-last: a
# split vector stage), column sums, max/min with NaN, arg-reductions, any/all.
# Chunk bounds are fixed at compile time, so one and two threads agree bit for bit.
def _split_cases():
    torch.manual_seed(0)
    big = torch.randn(1 << 20) * 10 + 3
    act = torch.randn(16, 24, 48, 48).to(memory_format=torch.channels_last)
    ties = torch.zeros(1 << 19)
    ties[200_000], ties[400_000], ties[(1 << 19) - 1] = 5.0, 5.0, 5.0  # first of three maxima
    nan = torch.randn(1 << 19)
    nan[300_000], nan[450_000] = float("nan"), float("nan")
    cols = torch.randn(20_000, 40)
    cols[15_000, 7] = float("nan")
    ints = torch.randint(-1000, 1000, (1 << 20,))
    flags = torch.rand(1 << 20) > 1e-6
    return [
        (lambda t: (t.sum(), t.mean(), t.amax(), t.amin(), torch.argmax(t), torch.argmin(t)), big),
        (lambda t: (t.sum((0, 2, 3)), torch.var_mean(t, (0, 2, 3), correction=0), t.amax((0, 2, 3))), act),
        (lambda t: (torch.argmax(t), torch.argmin(-t), t.amax()), ties),
        (lambda t: (torch.argmax(t), torch.argmin(t), t.amax(), t.amin(), t.sum()), nan),
        (lambda t: (t.sum(0), t.amax(0), t.amin(0), torch.var_mean(t, 0)), cols),
        (lambda t: (t.sum(), t.amax(), torch.argmax(t)), ints),
        (lambda t: (t.any(), t.all(), t.sum()), flags),
    ]


@pytest.mark.parametrize("case", range(7))
def test_split_reductions_match_eager(case):
    fn, x = _split_cases()[case]
    check_compiled(fn, x, rtol=1e-4, atol=5e-4)


def test_split_reductions_same_for_any_thread_count():
    from helpers import compile_fresh
    fn, x = _split_cases()[1]
    compiled = compile_fresh(fn)
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            torch.set_num_threads(n)
            results.append(compiled(x))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(torch.utils._pytree.tree_leaves(results[0]), torch.utils._pytree.tree_leaves(results[1])):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_logcumsumexp(dtype):
    """logcumsumexp is ember's own scan (a log-sum-exp running value, the larger operand
    factored out, as ATen's helper), not an ATen call; infinities and NaN as in eager."""
    from ember.records import Recording

    torch.manual_seed(0)
    x = (torch.randn(4, 37, 6) * 30).to(dtype)
    special = x.clone()
    special[0, 3, :] = float("-inf")  # -inf then finite values
    special[1, :, 0] = float("-inf")  # a column of -inf stays -inf
    special[1, 5:, 1] = float("inf")  # +inf from step 5 on
    special[2, 7, 2] = float("nan")  # NaN from step 7 on
    special[3, 0, :] = 1e30  # a large first step: later ones add nothing
    tol = {} if dtype != torch.bfloat16 else {"rtol": 2e-2, "atol": 2e-2}
    records = []
    recording = Recording(records)
    try:
        for t in (x, special):
            for dim in (0, 1, -1):
                check_compiled(lambda a: torch.logcumsumexp(a, dim), t, **tol)
        check_compiled(lambda a: torch.logcumsumexp(a.float() * 0.5, 1).to(a.dtype) + a, x, **tol)
    finally:
        recording.stop()
    assert records and not [e for r in records for e in r.cg.externs], "logcumsumexp ran in ATen"
