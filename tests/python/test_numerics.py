"""Numerical edge cases against eager: NaN and infinities through max/min/relu/softmax/
clamp, division by zero, integer division and overflow, -0.0, bool arithmetic, and large
reductions. Exact results (everything but the large reductions) must be identical to
eager's, sign of zero included, except where eager itself leaves a result undefined
(noted at each such test)."""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import compile_fresh

NAN, INF = math.nan, math.inf
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


def assert_identical(actual, expected, zero_sign=True):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if not expected.dtype.is_floating_point:
        assert torch.equal(actual, expected), (actual, expected)
        return
    a, e = actual.double(), expected.double()
    assert torch.equal(a.isnan(), e.isnan()), ("NaN positions", actual, expected)
    keep = ~e.isnan()
    assert torch.equal(a[keep], e[keep]), (actual, expected)
    if zero_sign:
        assert torch.equal(a[keep].signbit(), e[keep].signbit()), ("sign of zero", actual, expected)


def check(fn, *args, zero_sign=True):
    expected = fn(*args)
    actual = compile_fresh(fn)(*args)
    if not isinstance(expected, tuple):
        actual, expected = (actual,), (expected,)
    for a, e in zip(actual, expected):
        assert_identical(a, e, zero_sign)


def specials(dtype, n=40):
    """NaN, +-inf, +-0.0 and ordinary values, repeated so that both eager's vector loop
    and its scalar tail see them."""
    base = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-3]
    return torch.tensor((base * n)[: n * 2], dtype=dtype)


# ---- NaN and infinities --------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_propagates_through_max_min_relu_clamp(dtype):
    x = specials(dtype)
    y = x.flip(0)
    # Ties between -0.0 and 0.0 are broken differently by eager's vector and scalar loops
    # in maximum/minimum and amax/amin, so their zero sign is not compared.
    check(lambda a, b: (torch.maximum(a, b), torch.minimum(a, b)), x, y, zero_sign=False)
    check(lambda a: (torch.relu(a), torch.clamp(a, -1.0, 2.0), torch.clamp(a, min=0.0), torch.clamp(a, max=0.5),
                     F.hardtanh(a), a.clamp(min=NAN)), x)
    check(lambda a: (a.view(4, -1).amax(1), a.view(4, -1).amin(1), a.view(4, -1).max(1).values, a.max(), a.min()),
          x, zero_sign=False)
    # argmax: the first NaN wins, as in eager.
    check(lambda a: (a.view(4, -1).argmax(1), a.view(4, -1).argmin(1), a.view(4, -1).max(1).indices), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_with_infinities_and_nan(dtype):
    rows = torch.tensor([
        [0.0, 1.0, 2.0, 3.0],
        [-INF, -INF, -INF, -INF],   # all masked: NaN, as in eager
        [-INF, 0.0, -INF, 1.0],     # masked entries become exact zeros
        [INF, 0.0, 1.0, 2.0],       # inf - inf: NaN
        [NAN, 0.0, 1.0, 2.0],
        [1e4, -1e4, 0.0, 1e4],      # large logits: no overflow
    ], dtype=dtype).repeat(3, 5)
    expected_ok = ~torch.isnan(torch.softmax(rows.float(), -1))
    check(lambda t: (torch.softmax(t, -1).isnan(), torch.log_softmax(t, -1).isnan(),
                     torch.softmax(t, -1) == 0), rows)
    actual = compile_fresh(lambda t: torch.softmax(t, -1))(rows)
    torch.testing.assert_close(actual[expected_ok], torch.softmax(rows, -1)[expected_ok])


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_and_inf_through_sums_and_means(dtype):
    x = specials(dtype).view(4, -1)
    check(lambda a: (a.sum(1).isnan(), a.sum(1).isinf(), a.mean(1).isnan(), a.prod(1).isnan(),
                     torch.cumsum(a, 1).isnan(), torch.nan_to_num(a), torch.isfinite(a)), x)


# ---- division by zero ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_float_division_by_zero(dtype):
    a = specials(dtype)
    z = torch.tensor([0.0, -0.0] * (a.numel() // 2), dtype=dtype)
    check(lambda x, y: (x / y, torch.div(x, y, rounding_mode="trunc"), torch.div(x, y, rounding_mode="floor"),
                        torch.floor_divide(x, y), torch.remainder(x, y), torch.fmod(x, y), torch.reciprocal(y)), a, z)
    check(lambda x: (x / 0.0, x / -0.0, torch.floor_divide(x, 0.0), torch.remainder(x, 0.0)), a)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_floor_and_trunc_division_signs(dtype):
    lo = -9 if dtype != torch.uint8 else 0
    a = torch.arange(lo, 10, dtype=dtype).repeat_interleave(8)
    b = torch.tensor([d for d in (-4, -3, -1, 1, 2, 3, 5, 7) if d > 0 or dtype != torch.uint8],
                     dtype=dtype).repeat(a.numel() // (8 if dtype != torch.uint8 else 5) + 1)[: a.numel()]
    check(lambda x, y: (torch.floor_divide(x, y), torch.div(x, y, rounding_mode="floor"),
                        torch.div(x, y, rounding_mode="trunc"), torch.remainder(x, y), torch.fmod(x, y)), a, b)
    check(lambda x: (torch.floor_divide(x, 3), torch.remainder(x, 3), torch.fmod(x, 3), x // 2, x % 4), a)
    if dtype != torch.uint8:
        check(lambda x: (torch.floor_divide(x, -3), torch.remainder(x, -3), torch.fmod(x, -3)), a)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_division_by_zero_never_traps(dtype):
    # Eager raises ZeroDivisionError; generated code must not trap (SIGFPE would kill the
    # process). ember defines x // 0, x % 0 and fmod(x, 0) as 0 (csrc/ir/expr.h).
    a = torch.tensor([7, -7, 0, 5] * 4, dtype=dtype)
    b = torch.tensor([0, 0, 0, 2] * 4, dtype=dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.floor_divide(a, b)
    out = compile_fresh(lambda x, y: (torch.floor_divide(x, y), torch.remainder(x, y), torch.fmod(x, y),
                                      torch.div(x, y, rounding_mode="trunc")))(a, b)
    assert [o[:4].tolist() for o in out] == [[0, 0, 0, 2], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 2]]
    # INT_MIN / -1 wraps to INT_MIN (x86's idiv traps on it, and so does eager: SIGFPE).
    lo = torch.iinfo(dtype).min
    m = torch.tensor([lo] * 8, dtype=dtype)
    out = compile_fresh(lambda x: (torch.div(x, -1, rounding_mode="trunc"), torch.floor_divide(x, -1),
                                   torch.remainder(x, -1), torch.fmod(x, -1)))(m)
    assert [o[0].item() for o in out] == [lo, lo, 0, 0]


# ---- integer overflow ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", INTS)
def test_integer_overflow_wraps(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, info.min, info.max - 1, info.min + 1, 0, 1, -1 if info.min < 0 else 2, 77] * 4,
                     dtype=dtype)
    check(lambda a: (a + 1, a - 1, a * 3, a * a, a + a, -a, torch.abs(a), a.sum(), a.cumsum(0)), x)
    check(lambda a, b: (a + b, a * b, a - b), x, x.flip(0))
    check(lambda a: (a.to(torch.int8), a.to(torch.uint8), a.to(torch.int16), a.to(torch.float32)), x)


# ---- -0.0 ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_negative_zero(dtype):
    x = torch.tensor([-0.0, 0.0, -1.0, 1.0] * 8, dtype=dtype)
    check(lambda a: (-a, a.abs(), a * -1, a * 0.0, a * -0.0, a - 0.0, a + -0.0, torch.relu(a), a.clamp(min=0.0),
                     torch.where(a == 0, a, 5.0), a.clone(), a.to(torch.float64), torch.sign(a), torch.sqrt(a),
                     torch.reciprocal(a), torch.floor(a), torch.ceil(a * 0.5), torch.round(a), torch.trunc(a),
                     torch.atan2(a, a), torch.copysign(torch.ones_like(a), a), torch.signbit(a)), x)
    check(lambda a: (a.view(4, 8).sum(0), a.view(4, 8).prod(0)), -x.abs())


# ---- bool arithmetic ---------------------------------------------------------------------

def test_bool_arithmetic():
    a = torch.tensor([True, False, True, False] * 5)
    b = torch.tensor([True, True, False, False] * 5)
    check(lambda x, y: (x + y, x * y, x | y, x & y, x ^ y, ~x, torch.logical_not(x), torch.logical_xor(x, y),
                        x.sum(), x.int() - y.int(), x + 1, x * 2.5, x.to(torch.float16), x.cumsum(0),
                        torch.where(x, y, ~y), x == y, x < y, x.any(), x.all(), torch.maximum(x, y),
                        x.float().mean(), x / 2, torch.sign(x)), a, b)


# ---- large reductions ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_large_reductions_within_tolerance(dtype):
    # 2^21 + 3 elements: accumulation order differs from eager's; the error against an
    # fp64 reference must be of the same order as eager's.
    torch.manual_seed(0)
    x = (torch.randn(2**21 + 3, dtype=torch.float64) + 0.5).to(dtype)
    ref_sum = x.double().sum()

    def fn(t):
        return t.sum(), t.mean(), t.view(-1)[:2**21].view(1024, 2048).sum(0), t.var(), t.amax()

    actual, expected = compile_fresh(fn)(x), fn(x)
    e_err = (expected[0].double() - ref_sum).abs().item()
    a_err = (actual[0].double() - ref_sum).abs().item()
    rel = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}[dtype]
    assert a_err <= max(3 * e_err, rel * x.double().abs().sum().item()), (a_err, e_err)
    torch.testing.assert_close(actual[1], expected[1], rtol=rel, atol=rel)
    torch.testing.assert_close(actual[2], expected[2], rtol=rel, atol=rel * 100)
    torch.testing.assert_close(actual[3], expected[3], rtol=rel * 10, atol=rel)
    assert_identical(actual[4], expected[4])


def test_erf_accuracy_and_special_values():
    """The CPU's inline erf (codegen/c_prelude.cpp, ember_erff): within 5e-7 of the exact
    value everywhere (Abramowitz & Stegun 7.1.26 after float rounding; eager's vectorized
    erf is the same formula), within 2e-6 relative below |x| = 0.25 (the Taylor side, where
    A&S alone is off by up to 100% at tiny x), odd, and exact at 0, +-inf and NaN. Exact GELU
    through it stays within eager's error bound as well."""
    x = torch.cat([torch.linspace(-6, 6, 120001), torch.logspace(-38, 0, 4001), -torch.logspace(-38, 0, 4001),
                   torch.tensor([0.0, -0.0, INF, -INF, NAN, 1e-40, 0.25, -0.25, 4.0, -4.0, 50.0])])
    y = compile_fresh(torch.erf)(x)
    ref = torch.erf(x.double())
    finite = x.isfinite()
    assert (y.double() - ref)[finite].abs().max().item() <= 5e-7
    small = finite & (x.abs() < 0.25) & (x.abs() > 1e-37)  # normal results (a subnormal keeps fewer bits)
    assert ((y.double() - ref)[small].abs() / ref[small].abs()).max().item() <= 2e-6
    assert torch.equal(y[-11:-6].isnan(), torch.tensor([False, False, False, False, True]))
    assert y[-11:-7].tolist() == [0.0, 0.0, 1.0, -1.0] and y[-10].signbit() and not y[-11].signbit()
    assert torch.equal(compile_fresh(torch.erf)(-x[finite]), -y[finite])
    g = torch.linspace(-10, 10, 100001)
    gref = F.gelu(g.double())
    assert (compile_fresh(F.gelu)(g).double() - gref).abs().max().item() <= 1e-6
