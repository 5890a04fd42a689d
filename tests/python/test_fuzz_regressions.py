"""Programs the differential fuzzer (python -m ember.fuzz) found ember getting wrong,
minimized, each compiled through torch.compile and compared with eager bit for bit
(values, NaN positions and the sign of zero). The seed that found each is named; the
C++ side of the same bugs is in tests/cpp/test_fuzz_regressions.cpp."""
import math

import pytest
import torch
import torch.nn.functional as F

import ember

from helpers import compile_fresh

NAN, INF = math.nan, math.inf


def assert_identical(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.is_floating_point:
        a, e = actual.double(), expected.double()
        assert torch.equal(a.isnan(), e.isnan()), (actual, expected)
        keep = ~e.isnan()
        assert torch.equal(a[keep], e[keep]), (actual, expected)
        assert torch.equal(a[keep].signbit(), e[keep].signbit()), ("sign of zero", actual, expected)
    else:
        assert torch.equal(actual, expected), (actual, expected)


def check_identical(fn, *args):
    expected = fn(*args)
    actual = compile_fresh(fn)(*args)
    for a, e in zip(actual if isinstance(actual, tuple) else (actual,),
                    expected if isinstance(expected, tuple) else (expected,)):
        assert_identical(a, e)


# Seed 14: a cumsum along a unit dim left its loop variable unbound ("unbound loop
# variable in codegen").
def test_cumsum_along_unit_dim():
    x = torch.randn(4, 17).t()
    check_identical(lambda t: (torch.cumsum(t.unsqueeze(-1), 2), torch.cumprod(t[:1], 0)), x)
    check_identical(lambda t: torch.cumprod(t, 0, dtype=torch.float64), torch.randint(-5, 5, (1, 2), dtype=torch.int32))


# Seed 152: a reduction naming dim -1 of a 0-d tensor wrote past the end of a vector
# in lowering (heap corruption, then a segfault).
def test_reduction_of_zero_dim_tensor():
    x = torch.rand(5, 3) > 0.5
    check_identical(lambda t: (torch.any(t.select(0, -4), -1), torch.amax(t.select(0, -4), [])), x[:, 0])
    check_identical(lambda t: (t.sum(-1), t.sum(0, keepdim=True), t.amin(-1), t.argmax(-1)), torch.tensor(2.5))


# Seed 74: floor division of floats was floor(a / b). ATen goes through fmod:
# 1 // 0.1 is 9 (a / b rounds to 10), inf // 3 is NaN, and -tiny // 3 is -1.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_float_floor_division_matches_aten(dtype):
    a = torch.tensor([1.0, INF, -INF, NAN, -1e-30, 1e-30, 7.0, -7.0, 0.0, -0.0, 5.5, 1e30] * 3, dtype=dtype)
    b = torch.tensor([0.1, 3.0, 3.0, 2.0, 3.0, -3.0, -2.0, 2.0, -1.0, 1.0, 0.0, 7.0] * 3, dtype=dtype)
    check_identical(lambda x, y: (torch.floor_divide(x, y), torch.div(x, y, rounding_mode="floor")), a, b)
    check_identical(lambda x: (torch.floor_divide(x, -3), torch.div(x, 0.1, rounding_mode="floor")), a)


# Seed 85: a zero remainder of floats took the divisor's sign (Python's rule); ATen's
# keeps fmod's, the dividend's.
def test_float_remainder_zero_keeps_dividend_sign():
    a = torch.tensor([-4.0, 4.0, -0.0, 0.0, 1.0, INF, -3.0, 2.5] * 3)
    check_identical(lambda x: (torch.remainder(x, 2.0), torch.remainder(x, -2.0), torch.fmod(x, -2.0)), a)


# Seed 58: relu(-0.0) gave 0.0; ATen's clamp and max keep the first operand on a tie,
# so relu(-0.0) and clamp(-0.0, min=0) are -0.0.
def test_relu_and_clamp_keep_negative_zero():
    a = torch.tensor([-0.0, 0.0, -1.0, NAN, 2.0] * 5)
    check_identical(lambda x: (torch.relu(x), torch.clamp(x, min=0.0), torch.clamp(x, max=-0.0), F_hardtanh(x)), a)


def F_hardtanh(x):
    return torch.nn.functional.hardtanh(x, 0.0, 1.0)


# Seed 251: f16/bf16 ops read a wider operand (a 0-d f64 tensor, a Python float) at
# f32 precision; eager first converts it to the common dtype (remainder(h, 0.1) is 0 for
# h = f16(0.1)). mul and div are the exception: ATen reads a scalar second operand at
# f32 precision.
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_float_operands_round_to_common_dtype(dtype):
    h = torch.tensor([0.1, 0.2, -0.3, 5.0, 1.0, 0.7] * 4, dtype=dtype)
    s = torch.tensor(0.1, dtype=torch.float64)
    check_identical(lambda x: (x < 0.1, x == 0.1, torch.remainder(x, 0.1), torch.fmod(x, s), x + 0.1, 0.1 - x,
                               torch.remainder(x, s)), h)
    check_identical(lambda x, x7: (x * 0.1, x / 0.1, x * s, torch.floor_divide(x7, 0.1),
                                   torch.div(x7, 0.1, rounding_mode="trunc")), h, h * 7)


# Seed 1264: cumsum/cumprod of f32 accumulated in f32 where eager accumulates in double,
# which decides cancellation and overflow.
def test_scans_accumulate_floats_in_double():
    check_identical(lambda x: torch.cumsum(x, 0), torch.tensor([1e8, 1.0, -1e8, 3.0]))
    check_identical(lambda x: torch.cumprod(x, 0), torch.tensor([1e30, 1e30, 1e-30, 2.0]))
    check_identical(lambda x: torch.cumsum(x, -1), torch.tensor([[1000.0, 0.4, 0.4, -1000.0]] * 3, dtype=torch.float16))


# Seed 2174: trunc division of f16/bf16 tensors truncated the f32 quotient; ATen rounds
# it to f16 first (a scalar divisor keeps the f32 quotient).
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_float_trunc_division_rounds_first(dtype):
    torch.manual_seed(0)
    a = (torch.rand(64, 64) * 255).round().to(dtype)
    b = (torch.randn(64, 64) * 0.05).to(dtype)
    check_identical(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)
    check_identical(lambda x: torch.div(x, 0.0537, rounding_mode="trunc"), a)


# Seed 641: var_mean's mean was sum / n (inf where the slice holds an infinity);
# eager's Welford gives NaN once an infinity meets another element.
def test_var_mean_mean_is_nan_where_welford_is():
    x = torch.randn(13, 40)
    x[0, 0], x[5, 1], x[3, 2], x[4, 2] = INF, -INF, INF, INF
    fn = lambda t: torch.var_mean(t, [0], correction=1)  # noqa: E731
    for a, e in zip(compile_fresh(fn)(x), fn(x)):
        torch.testing.assert_close(a, e, equal_nan=True)


# Seed 4462: pow(x, +-0.5) on f16 is powf in ATen (sqrt/rsqrt are special cases for the
# other float dtypes only): pow(-inf, -0.5) is 0 and pow(-0.0, 0.5) is 0.0 there.
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16, torch.float64])
def test_pow_half_exponents_follow_aten_per_dtype(dtype):
    x = torch.tensor([-INF, -0.0, -1.0, INF, 0.0, 4.0] * 4, dtype=dtype)
    check_identical(lambda t: (torch.pow(t, 0.5), torch.pow(t, -0.5), torch.pow(t, -1), torch.pow(t, -2),
                               torch.pow(t, 3), torch.pow(t, 1.5)), x)


# Seeds 4647, 4845, 7721: f16 results of one op were read unrounded by the next op
# fused with it. Eager rounds every op's f16/bf16 result: pow overflowing f16 is -inf
# and log_softmax of it NaN (ember had a finite f32 value and 0), and remainder of the
# rounded value lands elsewhere. With emulate_precision_casts ember rounds them too;
# only a decomposition's own intermediates stay unrounded (fx_import marks them
# `internal`).
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_results_rounded_between_ops(dtype, monkeypatch):
    monkeypatch.setattr(ember.config, "emulate_precision_casts", True)
    a = torch.tensor([[1.37, -2.21, 250.0, 3.3], [0.71, 9.9, -1.01, 2.5]], dtype=dtype)
    b = torch.tensor([[0.3, 2.7, 7.0, -1.9], [1.1, 5.0, 2.0, 0.77]], dtype=dtype)
    check_identical(lambda x, y: torch.remainder(torch.remainder(x, 2.5), y), a, b)
    check_identical(lambda x, y: torch.minimum(torch.remainder(x, -0.75), y), a, b)
    fn = lambda x, y: torch.log_softmax(torch.pow(x, y), 0, dtype=torch.float32)
    torch.testing.assert_close(compile_fresh(fn)(a, b), fn(a, b), equal_nan=True)  # NaN where eager's pow is inf
    check_identical(lambda x: torch.floor(x * 3.3 + 0.1) - x / 7, a)


def test_fused_low_precision_chain_rounds_only_what_it_stores():
    # The default (Inductor's): a fused f16 chain computes in f32. x * 300 overflows f16
    # (inf in eager), but divided by 600 in the same kernel it is finite, as in f32.
    x = torch.tensor([250.0, -251.0, 3.0, 0.5], dtype=torch.float16)
    fn = lambda t: (t * 300) / 600  # noqa: E731
    assert torch.isinf(fn(x)[:2]).all()
    out = compile_fresh(fn)(x)
    assert torch.equal(out, ((x.float() * 300) / 600).half())
    assert not ember.config.emulate_precision_casts


def test_decomposition_intermediates_stay_unrounded():
    # hardswish, layer_norm and softmax are one op each in eager (one rounding); their
    # decompositions must not round between their own steps.
    x = torch.randn(8, 64, dtype=torch.float16) * 4
    w, b = torch.randn(64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    fn = lambda t: (torch.nn.functional.hardswish(t), torch.nn.functional.layer_norm(t, [64], w, b), t.softmax(-1))
    actual, expected = compile_fresh(fn)(x), fn(x)
    reference = (torch.nn.functional.hardswish(x.float()),
                                           torch.nn.functional.layer_norm(x.float(), [64], w.float(), b.float()),
                                           x.float().softmax(-1))
    for a, e, r in zip(actual, expected, reference):
        # as close to the f32 computation as eager's own kernels
        assert (a.float() - r).abs().max() <= (e.float() - r).abs().max() + 1e-3


# Seed 10024: layer_norm over 528,771 f32 elements (one row). One accumulator per SIMD
# lane summed 33k values each and lost 4 digits (max error 2.6e-3, eager's 1.8e-4).
# Long float sums now add per-block partials into a double total, in both kinds of
# reduction loop (along the row, and across rows into lane arrays).
@pytest.mark.parametrize("shape,dims", [((1, 129, 4099), [1, 2]), ((3, 600000), [1]), ((200000, 64), [0]),
                                        ((5000, 300), [0, 1])])
def test_long_float_sums_as_accurate_as_eager(shape, dims):
    torch.manual_seed(0)
    x = torch.randn(shape) * 100 + 3
    fn = lambda t: (t.sum(dims), torch.var_mean(t, dims))
    actual, expected, reference = compile_fresh(fn)(x), fn(x), fn(x.double())

    def err(a, r):
        return ((a.double() - r).abs() / r.abs().clamp_min(1e-30)).max().item()

    assert err(actual[0], reference[0]) <= max(4 * err(expected[0], reference[0]), 2e-7)
    assert err(actual[1][0], reference[1][0]) <= max(4 * err(expected[1][0], reference[1][0]), 2e-7)


# Seed 13214: a Python float compared with (or added to) an f16 tensor is first rounded
# to f16, where 1e30 is inf (and 3e-8 a subnormal). ember's constant rounding ignored
# f16's range: inf <= 1e30 was False (eager: inf <= inf, True).
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("s", [1e30, 65519.0, 65520.0, 3e-8, -2.98e-8, 6.1e-5, 1e39, 3.3961e38, 1e-40, 9.18e-41])
def test_python_float_rounded_to_half_range(dtype, s):
    x = torch.tensor([INF, -INF, 65504, 65520, 1e-6, 1e-8, 3e-8, -2.98e-8, 6e-5, 3.3895e38, 1e-40], dtype=dtype)
    check_identical(lambda a: (a <= s, a == s, a > -s, a * 0 + s, a + s), x)


# Seed 18074: softmax(exp(x)) fused with an f32 op in its first loop. That loop stayed
# scalar (libm's exp) while the next ones vectorized (libmvec's exp): the row max was
# one ulp (4e58 at exp(171.5)) below the recomputed value, exp of the shift was inf,
# and the row's 1.0 became inf/inf = NaN. The shift x - max is now clamped to <= 0.
def test_softmax_of_a_recomputed_input_in_mixed_type_kernel():
    x = torch.full((4, 9), 10.0, dtype=torch.float64)
    x[:, 1], x[:, 0], x[:, 2] = 171.5, 147.0, 66.0
    fn = lambda a: (torch.softmax(torch.exp(a), 1), (a != -0.3).reciprocal(), torch.log_softmax(torch.exp(a), 1))
    check_identical(fn, x)


# Seeds 7799, 13698 (torch 2.11, which keeps var.correction whole): var over dims that
# include a zero-size one divided by zero in codegen (SIGFPE in the compiler).
def test_var_over_zero_size_dims():
    x = torch.randn(9, 3, 0, 8, dtype=torch.bfloat16)
    fn = lambda t: (torch.ops.aten.var.correction(t, [1, 2], correction=1, keepdim=True), t.sum([1, 2], keepdim=True))
    check_identical(fn, x)


# Seed 72148: float -> int64 -> float, as `x.long() / y` computes it, is a truncation
# whose zero has no sign: eager's 0 / -0.33 is -0.0. gcc fused the two conversions into
# trunc() (-0.0 for -0.33, so 0 / -0.33 gave +0.0) and first dropped the + 0.0 that
# would have undone it; the generated C now adds a zero gcc cannot see.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_float_to_int64_to_float_keeps_an_unsigned_zero(dtype):
    x = torch.tensor([-0.33, 2.5, -1.5, -0.7, 0.2, -0.0, 7.9, -7.9] * 5, dtype=dtype)
    fn = lambda t: (torch.div(t.to(torch.int64), t, rounding_mode="trunc"), t.to(torch.int64).to(t.dtype),
                    t.to(torch.int64) / -t.abs())
    check_identical(fn, x)
    check_identical(lambda t: torch.div(t.to(torch.int64), t, rounding_mode="trunc"), x.reshape(5, 8).t())


# Seed 80280 (--dynamic): layer_norm over [13, 16] of values near 139 (139.03 minus small
# integers) with weights of about 100. Its mean (var_mean's) was sum / n, off by the
# rounding of a sum with a large offset (1.3e-5), which the weights made 20x eager's
# error (eager's Welford mean has no offset error); under dynamic=True the [13, 16]
# loops were not merged either (symbolic strides), another summation order. Now the
# mean is corrected by the deviations' sum, and both paths loop the same way.
@pytest.mark.parametrize("dynamic", [False, True])
def test_layer_norm_of_values_with_a_large_offset_is_as_accurate_as_eager(dynamic):
    gen = torch.Generator().manual_seed(80280)
    ints = torch.randint(-9, 10, (13, 2, 16, 17), dtype=torch.int32, generator=gen)
    offset = torch.tensor(139.0292)
    w = torch.randn(13, 16, generator=gen) * 100
    b = torch.randn(13, 16, generator=gen)

    def fn(i, s, w, b):
        x = torch.rsub(i.select(3, 9).transpose(1, 0), s)
        return F.layer_norm(x, [13, 16], w, b, eps=0.1), torch.var_mean(x, [1, 2], correction=0)[1]

    ref = fn(ints, offset.double(), w.double(), b.double())
    eager = fn(ints, offset, w, b)
    ours = compile_fresh(fn, dynamic=dynamic)(ints, offset, w, b)
    for o, e, r in zip(ours, eager, ref):
        rmse = lambda t: (t.double() - r).square().mean().sqrt().item()  # noqa: E731
        assert rmse(o) <= 3 * rmse(e) + 1e-7, (rmse(o), rmse(e))  # Inductor's low-precision rule


def check_identical_dynamic(fn, *args):
    expected = fn(*args)
    actual = compile_fresh(fn, dynamic=True)(*args)
    for a, e in zip(actual, expected):
        assert_identical(a, e)


# Seeds 213819, 214273, 216443 (--dynamic): a reshape of a non-contiguous input is a clone
# and a view; under symbols the view ran in ATen (lowering could not prove its sizes), and
# its result, a view of the clone, outlived the clone's place in the arena: the next
# intermediate placed there (another clone) overwrote a graph output, or the values a
# later kernel read.
def test_view_run_in_aten_keeps_its_base_alive():
    base = torch.randn(14, 16, 7, 25, generator=torch.Generator().manual_seed(214273)) * 100
    x = base[1:, 1::3, 1::2, 1::3][:13, :5, :3, :8]

    def fn(a):
        s = a.select(0, 11)
        return a.reshape([1560]), s * 2, s.reshape([8, 5, 3]).clamp(-100, 100)

    check_identical_dynamic(fn, x)
    y = torch.randn(8, 16, 17, 1).permute(2, 3, 1, 0)

    def norm(a):
        v = a.reshape([8, 1, 17, 16])
        return (v - v.mean([0], keepdim=True)) * torch.rsqrt(v.var([0], keepdim=True, correction=0) + 1e-5),

    y = y.half()
    # f16 rounding of the mean and variance may differ by an ulp; the bug gave NaN.
    torch.testing.assert_close(compile_fresh(norm, dynamic=True)(y)[0], norm(y)[0], rtol=1e-2, atol=1e-2)


# Seed 212650 (--dynamic): `a[1::3, :].flatten(0, 1)` of a sliced input is a view of the
# input in eager. AOTAutograd regenerates such an output from the input with the returned
# tensor's sizes, strides and storage offset when its views take symbols; ember returned
# its own copy (the flatten of a dim of symbolic size 1 is not a provable view), whose
# offset 0 gave the input's first elements. Now the output is eager's view of the input.
def test_output_that_views_an_input_under_symbols_is_that_view():
    base = torch.arange(10 * 13, dtype=torch.int32).reshape(10, 13)
    x = base[1::3, 1::3][:3, :4]

    def fn(a):
        return a[1::3, :].flatten(0, 1), a.t()[1:]

    expected = fn(x)
    actual = compile_fresh(fn, dynamic=True)(x)
    for a, e in zip(actual, expected):
        assert_identical(a, e)
        assert a.storage_offset() == e.storage_offset() and a.stride() == e.stride()
