"""What the fuzzer's first GPU campaign (python -m ember.fuzz --device cuda, seeds 0 to
13,566 on an H100, 2026-11-27) found ember's CUDA path getting wrong, minimized: each
program runs compiled and eagerly on CUDA, compared bit for bit (values, NaN positions,
the sign of zero), and on the CPU too. Where the cause shows in the generated CUDA, an
NVRTC test (no GPU needed) checks the code. The seed that found each is named;
docs/reliability.md has the table."""
import re

import pytest
import torch
import torch.nn.functional as F

from ember.runtime import cuda

from test_cuda_codegen import compile_all
from test_fuzz_regressions import check_identical

HAS_GPU = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")])]
needs_nvrtc = pytest.mark.skipif(not cuda.nvrtc_info()["available"], reason="NVRTC is not installed")


# -- Empty tensors: rows of zero elements ran one iteration -------------------------------
# 194 of the campaign's 298 findings (57 illegal addresses, 137 workers that died on one)
# and 18 wrong values: a row stage's loop ran max(1, n) iterations, so a row of zero
# elements read one element (printed as the constant 0) and stored one, into a buffer of
# zero bytes. layer_norm over [9, 0] (seed 201), cumsum along a dim of size 0 (seed 9854),
# prod of an empty slice gave 0 (seed 1790), all() False (3823), sum(exp(x)) 1.0 (11118).

def _layer_norm_empty(x, w, b):
    return F.layer_norm(x, [0, 31], w, b, eps=1e-5)


EMPTY_CASES = {
    # name: (function, input shapes and dtypes)
    "layer_norm_over_0x31": (_layer_norm_empty, [((0, 31), torch.float16)] * 3),          # seed 993
    "layer_norm_over_9x0_of_log": (lambda m, w, b: F.layer_norm(torch.log(m.float()), [9, 0], w, b, eps=1e-6),
                                   [((1, 9, 0), torch.bool), ((9, 0), torch.float32), ((9, 0), torch.float32)]),  # 201
    "cumsum_of_empty": (lambda x: (torch.cumsum(x, -1, dtype=torch.float32), torch.cumprod(x, 0)),
                        [((0,), torch.bfloat16)]),                                           # seed 9854
    "cumsum_rows_of_zero": (lambda x: (torch.cumsum(x, 1), torch.cumprod(x, 1)), [((5, 0), torch.float32)]),
    "prod_of_empty_bool": (lambda x: torch.prod(x, -1, keepdim=True), [((0,), torch.bool)]),  # seed 1790
    "all_of_empty": (lambda x: (torch.all(x), torch.all(x.view(1, 0), 1)), [((0,), torch.bfloat16)]),  # 3823
    "sum_exp_of_empty": (lambda x: torch.sum(torch.exp(x)), [((7, 16, 0, 3), torch.float32)]),  # seed 11118
    "prod_over_empty_dim": (lambda x: torch.prod(x, 0, keepdim=True), [((0, 4), torch.bfloat16)]),  # 11246
    "var_of_narrowed_to_empty": (lambda x: torch.var(x.narrow(0, 6, 0), [0], correction=0, keepdim=True),
                                 [((8, 7), torch.float32)]),                                 # seed 3925
    "logsumexp_of_empty": (lambda x: torch.logsumexp(x, [0, 1, 2]), [((8, 0, 5), torch.float32)]),  # 8753
    "norm_of_narrowed_to_empty": (lambda x: torch.linalg.vector_norm(x.narrow(0, 0, 0), 2, [0], keepdim=True),
                                  [((1, 5, 17), torch.float32)]),                            # seed 10286
    "mean_of_layer_norm_of_empty": (lambda x, w, b: torch.mean(F.layer_norm(x, [1], w, b, eps=1e-6), [0, 1, 2]),
                                    [((0, 2, 1), torch.bfloat16), ((1,), torch.bfloat16), ((1,), torch.bfloat16)]),
    "normalize_of_empty": (lambda x: (x - x.mean([0], keepdim=True)) * torch.rsqrt(x.var([0], keepdim=True,
                                                                                        correction=0) + 1e-5),
                           [((0,), torch.bfloat16)]),                                        # seed 5691
}


def _inputs(specs, device):
    g = torch.Generator().manual_seed(0)
    out = []
    for shape, dtype in specs:
        x = torch.randn(shape, generator=g) if dtype != torch.bool else torch.rand(shape, generator=g) > 0.5
        out.append(x.to(dtype).to(device))
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_zero_size_graphs_match_eager(name, device):
    fn, specs = EMPTY_CASES[name]
    with torch.no_grad():
        check_identical(fn, *_inputs(specs, device))
    if device == "cuda":
        torch.cuda.synchronize()  # an illegal address would surface here


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_rows_of_zero_elements_loop_zero_times(name):
    """The CUDA of each graph above compiles; where every row of a kernel that runs is
    of zero elements, each row loop is bounded by 0 (the fix), not by 1 (the bug)."""
    fn, specs = EMPTY_CASES[name]
    compiled = [cg for cg in compile_all(fn, _inputs(specs, "cpu")) if not isinstance(cg, str)]
    sources = "\n".join(cg.source for cg in compiled if cg.kernels)
    if name in ("layer_norm_over_0x31", "layer_norm_over_9x0_of_log", "sum_exp_of_empty", "prod_of_empty_bool",
                "var_of_narrowed_to_empty", "logsumexp_of_empty"):
        bounds = re.findall(r"for \(int j = [^;]*; j < (\w+);", sources)
        assert bounds and set(bounds) == {"0"}, sources


# -- relu and clamp of -0.0 ----------------------------------------------------------------
# 60 findings (seed 197 the first): relu(-0.0) and clamp(-0.0, min=0) are +0.0 in eager on
# CUDA, whose clamp kernels call ::max/::min (fmaxf/fminf, -0.0 below +0.0), and -0.0 on
# the CPU (std::max: the first operand wins the tie). ember's CUDA prelude had the CPU's.

SPECIALS = [-0.0, 0.0, -1.5, 2.5, float("nan"), float("inf"), -float("inf"), -0.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_relu_and_clamp_of_negative_zero(device, dtype):
    x = torch.tensor(SPECIALS, dtype=dtype, device=device)
    check_identical(lambda t: (torch.relu(t), torch.clamp(t, 0, 2), torch.clamp(t, min=0), torch.clamp(t, max=0),
                               torch.clamp(t, -0.5, 0), torch.clamp(torch.round(t), 0, 2)), x)


@needs_nvrtc
def test_cuda_max_and_min_order_negative_zero_below_positive_zero():
    compiled = [cg for cg in compile_all(lambda t: torch.relu(t) + 1, [torch.randn(64)]) if not isinstance(cg, str)]
    source = compiled[0].source
    assert "fmaxf(a, b)" in source and "ember_max_f32(" in source.split("extern \"C\"", 1)[1]


# -- Scalars and division as ATen's CUDA kernels read them ---------------------------------
# ATen's CUDA kernels read a Python number of add/sub/mul/div at f32 (opmath) where its CPU
# kernels first round it to f16/bf16: f16 x + 1e30 is -inf for x = -inf on CUDA, NaN on the
# CPU (seeds 8041, 9617). A 0-d tensor on the device is no CPU scalar: trunc division of
# f16/bf16 by it rounds the divisor and the quotient (seeds 297, 2617, 11193, 11279, 11594),
# where the CPU truncates the f32 quotient. Division by a number multiplies by its f32
# reciprocal. pow(x, +-0.5) is sqrt/rsqrt in every dtype (seeds 4462, 10320: f16
# pow(-inf, 0.5) is NaN on CUDA, inf on the CPU).

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_python_numbers_and_zero_dim_divisors(device, dtype):
    x = torch.tensor(SPECIALS + [9060.3, -20409.1, 669.6, 80.7, 3.0, 49.0], dtype=dtype, device=device)
    d = torch.tensor(0.0110347, device=device)  # a 0-d f32 tensor: f16 rounds it
    check_identical(lambda t, s: (torch.add(t, 1e30, alpha=2), torch.rsub(t, 1e30), torch.sub(t, 1e-30),
                                  torch.mul(t, 1e30), torch.div(t, s, rounding_mode="trunc"),
                                  torch.div(t, s.to(t.dtype), rounding_mode="trunc"),
                                  torch.div(t, 49.0, rounding_mode="trunc"), torch.div(t, 3.0),
                                  torch.pow(t, 0.5), torch.pow(t, -0.5)), x, d)


@needs_nvrtc
def test_cuda_reads_python_numbers_at_f32_and_rounds_zero_dim_divisors():
    def fn(t, s):
        return torch.add(t, 1e30, alpha=2), torch.div(t, s, rounding_mode="trunc"), torch.pow(t, 0.5)

    compiled = compile_all(fn, [torch.randn(64).half(), torch.tensor(0.01)])
    source = "\n".join(cg.source for cg in compiled if not isinstance(cg, str))
    body = source.split('extern "C"', 1)[1]
    assert "1.00000002e+30f" in body            # not rounded to f16 (inf)
    # the 0-d divisor is rounded to f16, and so is the quotient before it is truncated
    assert re.search(r"(\w+) = b\d+\[0LL\];\s+const float \w+ = ember_round_h\(\(float\)\1\)", body)
    assert re.search(r"= \w+ / \w+;\s+const float (\w+) = ember_round_h\(\(float\)\w+\);\s+"
                     r"const float (\w+) = \(float\)\1;\s+const float \w+ = truncf\(\2\)", body)
    assert "sqrtf(" in body and "powf(" not in body


# -- Integer negation wraps ----------------------------------------------------------------
# Seed 4844: lt(abs(x), relu(abs(x))) for int64 x = INT64_MIN is True in eager (abs wraps to
# INT64_MIN, relu makes it 0); NVRTC, which has no -fwrapv, took the signed negation in
# abs for one that cannot overflow, so abs(x) >= 0, and folded the comparison to False
# (its PTX stored a constant). Integer neg and abs now negate through unsigned arithmetic.

# int16 on CUDA then still differed (on the H100, 2026-11-27): `-t > 0` for t = -32768 was
# True in ember, and `-t // 2` was 16384 where eager has -16384 (seed 25141). The PTX was
# right (neg.s16, then setp.gt.s16); ptxas compiled neg.s16 and abs.s16 as a 32-bit
# negation of the sign-extended value and did not narrow the result (its SASS: PRMT 0x9910,
# IMAD.MOV -R, ISETP.GT), where add, sub and mul are narrowed after the op. int16 negation
# is now ember_neg_i16: 32-bit, then narrowed by an explicit byte permute.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8])
def test_integer_abs_and_neg_of_the_minimum_wrap(device, dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.min + 1, -3, 0, 5, info.max], dtype=dtype, device=device)
    check_identical(lambda t: (torch.lt(torch.abs(t), torch.relu(torch.abs(t))), torch.neg(t), torch.abs(t),
                               torch.abs(t) < 0, -t > 0, torch.abs(t) > 0, torch.floor_divide(-t, 2)), x)


@needs_nvrtc
def test_cuda_integer_negation_is_unsigned():
    compiled = compile_all(lambda t: torch.lt(torch.abs(t), torch.relu(torch.abs(t))),
                           [torch.tensor([-(2 ** 63), 1, -2])])
    body = compiled[0].source.split('extern "C"', 1)[1]
    assert "(int64_t)(0ull - (unsigned long long)(" in body and "? -t" not in body


# -- What ptxas does to PTX that is right ----------------------------------------------------
# The rerun of the first campaign's findings and fresh seeds 20000:31564 (H100, 2026-11-27)
# left five programs whose CUDA and PTX computed what eager does; the SASS did not (read
# with NVRTC 13.0 and nvdisasm, no GPU needed):
#  - 1703, 24099, 25939: NVRTC ran with --fmad=true, and ptxas fused a product that eager
#    rounds to memory with the next op's subtraction: var's deviation x * y - mean became
#    fma(x, y, -mean), the product's rounding error where eager has 0. Over one element
#    (std with correction 1, var of a 0-d value with correction 2) that is divided by 0:
#    inf where eager has 0 / 0 = NaN; layer_norm over [1] multiplies it by 1 / sqrt(eps)
#    (-0.016240 where eager has the bias, -0.016352). Fixed first by --fmad=false; now the
#    printer rounds that product (__fmul_rn: mul.rn, which ptxas never fuses) and NVRTC
#    contracts elsewhere (--fmad=true).
#  - 25141 and the int16 case above: neg.s16 (ember_neg_i16 now).
#  - 11677: sign(p) + 2p of int64 p = -64 was -127 (eager -129). LLVM prints sign(x) as
#    (x > 0) + (x >> 63) and 2x as x << 1; ptxas took (x << 1) + (x >> 63) for a rotate
#    left by one (two SHF.L.W), which holds for a logical shift only. Integer sign is now
#    a select.
# The CPU runs of these programs pass before and after; the PTX tests below fail without
# the fixes (they read the PTX that ptxas is given, with ember's NVRTC options).

def _contraction_cases():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(17, generator=g) * 100
    y = torch.tensor([0.3 + 1e-7])
    a = torch.randn(17, 9, 1, generator=g)
    w, b = torch.tensor([3.9220]), torch.tensor([-0.0164])
    return {
        # seed 25939: the std of one element (a slice with step 3) of a product
        "std_of_one_product": (lambda x, y: torch.std((x * y)[-3::3], [0], correction=1, keepdim=True), (x, y)),
        # seed 1703: var of a 0-d mish (x * tanh(softplus(x))) with correction 2
        "var_of_zero_dim_mish": (lambda t: torch.var(F.mish(t.sum()), [], correction=2, keepdim=True),
                                 (torch.tensor(0.7311),)),
        # seed 24099: layer_norm over [1] of a product: exactly the bias in eager
        "layer_norm_over_one_of_product": (lambda t, w, b: F.layer_norm(t * -0.3, [1], w, b, eps=1e-6), (a, w, b)),
    }


CONTRACTION = _contraction_cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CONTRACTION))
def test_a_product_is_rounded_before_the_next_op(name, device):
    fn, args = CONTRACTION[name]
    with torch.no_grad():
        check_identical(fn, *[t.to(device) for t in args])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8])
def test_integer_sign_plus_twice_the_value(device, dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([-64, -1, 0, 1, 64, info.min, info.max, info.min + 1], dtype=dtype, device=device)
    p = torch.tensor([[-4, -4, -4]] * 9, dtype=torch.int32, device=device)  # seed 11677: prod is -64
    check_identical(lambda t: (torch.add(torch.sign(t), t, alpha=2), torch.sign(t) + t * 2), x)
    check_identical(lambda q: torch.add(torch.sign(torch.prod(q, 1)), torch.prod(q, 1), alpha=2), p)


def _ptx(source: str) -> str:
    """The PTX NVRTC makes of `source` for compute_90 with ember's options (those its
    identity lists), by NVRTC's C API."""
    import ctypes
    import os

    info = cuda.nvrtc_info()
    path = info["path"]
    options = info["identity"].split(path, 1)[1].split()
    major, minor = info["identity"].split()[1].split(".")
    builtins = os.path.join(os.path.dirname(path), f"libnvrtc-builtins.so.{major}.{minor}")
    if os.path.exists(builtins):
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"k.cu", 0, None, None) == 0
    opts = [o.encode() for o in options + ["--gpu-architecture=compute_90"]]
    n = ctypes.c_size_t()
    if lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        raise AssertionError(log.value.decode())
    lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
    ptx = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetPTX(prog, ptx)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value.decode()


def _ptx_of(fn, args):
    return "\n".join(_ptx(cg.source) for cg in compile_all(fn, list(args)) if not isinstance(cg, str) and cg.kernels)


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(CONTRACTION))
def test_a_deviation_takes_its_product_rounded_in_the_ptx(name):
    """The product that var's or layer_norm's deviation subtracts the mean from reaches
    ptxas as mul.rn.f32 (printed __fmul_rn), which it never fuses into the sub: NVRTC runs
    with --fmad=true, under which a plain mul.f32 would be (fma(x, y, -mean))."""
    fn, args = CONTRACTION[name]
    ptx = _ptx_of(fn, args)
    rounded = set(re.findall(r"^\s*mul\.rn\.f32\s+(%f\d+),", ptx, re.M))
    deviations = re.findall(r"^\s*sub(?:\.rn)?\.f32\s+%f\d+, (%f\d+), (%f\d+);", ptx, re.M)
    assert [d for d in deviations if set(d) & rounded], ptx


# -- Contraction where it cannot meet a statistic ---------------------------------------
# --fmad=false everywhere (the fix above, at first) cost ResNet's BN + ReLU kernels 1.6x on
# the H200 (32.6 vs 20.5 us, docs/benchmarks.md): NVRTC runs with --fmad=true, and only the
# products a sum takes together with a reduction's result (or a value derived from one)
# are rounded by the printer.

@needs_nvrtc
def test_eval_batch_norm_contracts_its_scale_and_shift():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 4, 4, generator=g)
    mean, var, w, b = (torch.rand(8, generator=g) + 0.5 for _ in range(4))
    fn = lambda t, m, v, w, b: F.relu(F.batch_norm(t, m, v, w, b, training=False, eps=1e-5))
    compiled = [cg for cg in compile_all(fn, [x, mean, var, w, b]) if not isinstance(cg, str) and cg.kernels]
    assert compiled and "__fmul_rn" not in "".join(cg.source for cg in compiled)
    ptx = "\n".join(_ptx(cg.source) for cg in compiled)
    assert re.search(r"^\s*fma\.rn\.f32", ptx, re.M) and not re.search(r"^\s*mul\.rn\.f32", ptx, re.M), ptx


@needs_nvrtc
def test_var_of_a_product_rounds_only_the_deviations_product():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 33, generator=g), torch.randn(4, 33, generator=g)
    source = "".join(cg.source for cg in compile_all(lambda a, b: torch.var(a * b, 1), [x, y])
                     if not isinstance(cg, str) and cg.kernels)
    body = source.split('extern "C"', 1)[1]
    assert re.search(r"__fmul_rn\([^;]*\) - ", body) or re.search(r" - __fmul_rn\(", body), body


@needs_nvrtc
def test_int16_negation_reaches_ptxas_without_neg_s16():
    x = torch.tensor([-32768, 5, -3], dtype=torch.int16)
    ptx = _ptx_of(lambda t: (-t > 0, torch.abs(t) > 0, torch.floor_divide(-t, 2)), [x])
    assert "prmt.b32" in ptx and "neg.s16" not in ptx and "abs.s16" not in ptx


@needs_nvrtc
def test_int64_sign_reaches_ptxas_without_shift_pairs_it_takes_for_a_rotate():
    """No add.s64 of a `shr.s64 x, 63` (LLVM's form of -(x < 0)) and a shift left."""
    x = torch.tensor([-64, 1, 0], dtype=torch.int64)
    ptx = _ptx_of(lambda t: torch.add(torch.sign(t), t, alpha=2), [x])
    ashr = set(re.findall(r"shr\.s64\s+(%rd\d+), %rd\d+, 63;", ptx))
    shl = set(re.findall(r"shl\.b64\s+(%rd\d+), %rd\d+, 1;", ptx))
    adds = re.findall(r"add\.s64\s+%rd\d+, (%rd\d+), (%rd\d+);", ptx)
    assert "setp.gt.s64" in ptx
    assert not [a for a in adds if set(a) & ashr and set(a) & shl], ptx
