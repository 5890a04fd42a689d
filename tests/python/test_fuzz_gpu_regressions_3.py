"""What the fuzzer's third campaign (scripts/gpu-fuzz-campaign on 4 H200s, 2026-11-27:
GPU seeds 120000 to 140000, CPU static 300000 to 310000, dynamic 310000 to 320000;
/work/notes/gpu-fuzz-3) found, minimized: each program runs compiled and eagerly on the
CPU and on CUDA; NVRTC tests (no GPU needed) check the generated code where the cause
shows there. Four findings were eager's rounding, not ember's: the generator rules that
leave them out are tested last (docs/reliability.md has the table)."""
import pytest
import torch

import ember.fuzz as fuzz
from ember.fuzz.campaign import GPU_DTYPES

from test_cuda_codegen import compile_all
from test_fuzz_gpu_regressions import DEVICES, _ptx_of, needs_nvrtc
from test_fuzz_gpu_regressions_2 import _rejected
from test_fuzz_regressions import check_identical
from helpers import compile_fresh



# -- int16 0 - x: ptxas left neg.s16 unnarrowed ---------------------------------------------
# GPU seed 133257: cumprod(rsub(x, 0)) of int16 into int64 read -(-32768) as +32768, so 9
# products had the wrong sign. NVVM turns the int16 0 - x (and x * -1) into neg.s16, which
# ptxas compiles as a 32-bit negation that it never narrows (as for -x, seed 25141). Sub
# and mul of int16 now narrow through a byte permute, as neg does.

@pytest.mark.parametrize("device", DEVICES)
def test_int16_difference_from_zero_wraps(device):
    x = torch.tensor([[-32761, 4, -32768], [32759, 8, -32768], [-32768, -1, 2]], dtype=torch.int16, device=device)
    minus_one = torch.tensor(-1, dtype=torch.int16, device=device)
    check_identical(lambda t, m: (torch.cumprod(torch.rsub(t, 0), 1), (t * m).long(), (0 - t).int() > 0), x, minus_one)


@needs_nvrtc
def test_cuda_int16_difference_is_narrowed():
    x = torch.tensor([-32768, 5], dtype=torch.int16)
    ptx = _ptx_of(lambda t: torch.cumprod(torch.rsub(t, 0), 0), [x])
    assert "neg.s16" not in ptx and "prmt.b32" in ptx, ptx


# -- A vector-stage result nothing reads: "unordered_map::at" -----------------------------
# GPU seed 133907: all over a dim of size 0, then all over dim 0 (a column reduction), times
# 0: the product simplified to 0, so nothing read the column reduction, which had no
# memory; its store looked the buffer up and raised. Unread results are not stored.

def _all_of_all_times_zero(t):
    return torch.mul(torch.all(torch.all(t, 2), 0), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_unread_column_reduction_matches_eager(device):
    x = torch.randn(8, 33, 1).half().expand(8, 33, 0).to(device)
    check_identical(_all_of_all_times_zero, x)


@needs_nvrtc
def test_unread_column_reduction_compiles():
    compiled = compile_all(_all_of_all_times_zero, [torch.randn(8, 33, 1).half().expand(8, 33, 0)])
    assert compiled and all(not isinstance(cg, str) and cg.kernels for cg in compiled), compiled


# -- var_mean's correction, where the offset is small against the spread -----------------
# CPU seed 304781: cumsum(layer_norm(x)) over rows of 4099 integers in [-9, 9] was off by
# 1e-3 (eager 4.5e-5). The corrected two-pass mean adds sum(x - m) / n, whose own
# rounding (x - m rounds alike for every integer of a binade; the f32 lanes add it up)
# put the mean 4.7e-7 off where sum / n alone was 7e-9 off, and the cumsum added that
# offset 4099 times. A slice now keeps the correction only where m^2 > var (seed 80280's
# offset case, where it is needed: test_fuzz_regressions.py).

@pytest.mark.parametrize("n", [4099, 4000])   # a blocked row (4096 + 3) and an unblocked one
def test_f32_var_mean_of_small_integers_is_as_close_as_eager(n):
    x = torch.randint(-9, 10, (129, n), generator=torch.Generator().manual_seed(304781)).float()
    var, mean = compile_fresh(lambda t: torch.var_mean(t, [1], correction=0))(x)
    ref_var, ref_mean = torch.var_mean(x.double(), [1], correction=0)
    assert (mean.double() - ref_mean).abs().max().item() < 1e-8   # about an ulp of ~0.07 (was 1.1e-6)
    # The squared deviations still add up in f32 lanes (eager's CPU Welford: f64).
    assert ((var.double() - ref_var) / ref_var).abs().max().item() < 1e-5   # (2e-6; eager 3e-8)


# -- eager's rounding, not ember's: generator rules ----------------------------------------

def test_division_by_zero_of_an_inexact_value_near_zero_is_not_generated():
    # Dynamic seed 312141: log_softmax(f16) / -0.0; eager rounded -4.6e-4 to 0 (NaN),
    # ember and fp64 have +inf. GPU seed 129420: cumsum(f16) / an int tensor with zeros;
    # eager's tree order gave 0 (NaN) where the exact sum is 3.05e-5 (+inf).
    gen = fuzz.Generator(0)
    near_zero = fuzz.Value("v", torch.tensor([-4.6e-4, -7.7]), False)
    far = fuzz.Value("v", torch.tensor([-0.5, -7.7]), False)
    assert _rejected(gen.require_regular, near_zero, "reciprocal")
    assert not _rejected(gen.require_regular, far, "reciprocal")
    assert "torch.true_divide(v0, -0.0)" not in fuzz.generate(312141).source()
    assert "torch.div(v1, a3)" not in fuzz.generate(129420, GPU_DTYPES).source()


def test_sum_that_cancels_below_its_rounding_is_not_generated():
    # GPU seed 127358: the sum of a bf16 normalization over 7 values, exactly 0: -0.0703
    # in ember and in eager on the CPU, 0.0 in eager on CUDA (its terms rounded an ulp apart).
    gen = fuzz.Generator(0)
    terms = torch.tensor([0.5117, -0.5625, -2.1875, 0.5859, 1.0703, 0.2559, 0.2559], dtype=torch.bfloat16)
    cancelling = fuzz.Value("v", terms, False, prec="bf16")
    plain = fuzz.Value("v", terms.abs(), False, prec="bf16")
    assert _rejected(gen.require_order_free_sum, cancelling, None)
    assert not _rejected(gen.require_order_free_sum, plain, None)
    assert not _rejected(gen.require_order_free_sum, fuzz.Value("v", terms, True, prec="bf16"), None)
    assert "torch.sum(v1)" not in fuzz.generate(127358, GPU_DTYPES).source()


def test_cumsum_that_cancels_far_below_its_precision_is_not_generated():
    # GPU seed 132100: a cumsum over int64 extremes rounded to f32 (9.2e18, -9.2e18, ...)
    # cancelled to 169.8 in ember (and fp64) and to -61.6 in eager's tree order.
    gen = fuzz.Generator(0)
    huge = fuzz.Value("v", torch.tensor([-130.45, -100.93, 9.223372e18, -9.223372e18, 61.77, 108.05]), False)
    tame = fuzz.Value("v", torch.tensor([-130.45, -100.93, 92.2, -92.2, 61.77, 108.05]), False)
    assert _rejected(gen.require_order_free_scan, huge, 0, "cumsum", False)
    assert not _rejected(gen.require_order_free_scan, tame, 0, "cumsum", False)
    assert "torch.cumsum(v0, -1)" not in fuzz.generate(132100, GPU_DTYPES).source()
