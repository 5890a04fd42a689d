// Graphs the GPU fuzz campaign (python -m ember.fuzz --device cuda) found the CUDA path
// mishandling, minimized. Each goes through the CUDA pipeline with the IR checked after
// every pass, and its source through NVRTC where one loads (as test_cuda_codegen.cpp);
// tests/python/test_fuzz_regressions.py runs them against eager on the GPU.
#include <cstdlib>
#include <iostream>

#include "check.h"
#include "nvrtc_util.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"

using ember_test::nvrtc;

namespace {

ember::CudaCode compiled_cuda(const std::string& graph) {
  ember::CudaCode code = ember_test::CudaPipeline(graph).cuda_code;
  if (const ember::Nvrtc* n = nvrtc()) {
    ember::CubinResult r = n->compile(code.source, "sm_90", "test.cu");
    CHECK(r.ok);
    if (!r.ok) std::cerr << r.log << "\n" << code.source;
  }
  return code;
}

}  // namespace

// split_long_reductions cut these reductions into row chunks of 1 row, whose partials
// index (row + v) * 4099 with v over a reduce dim of size 1; fuse gives unit dims no
// loop, so v stayed unbound: "unbound loop variable in codegen" (GPU fuzz seeds 53215,
// 56224, 56973). fuse now binds the vars of unit dims to 0.
TEST(cuda_fuzz_norm_over_rows_split_into_chunks_of_one_row) {
  ember::CudaCode code = compiled_cuda(R"(graph {
  %0 = input(0) : f32[2,2,129,4099]{1057542,528771,4099,1}
  %1 = aten.linalg_vector_norm.default(%0, 2, [0, 1, 2, 3], false, none) : f32[]{}
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{2});  // the partials, then their sum
}

TEST(cuda_fuzz_half_l1_norm_over_rows_split_into_chunks_of_one_row) {
  compiled_cuda(R"(graph {
  %0 = input(0) : f16[2,2,129,4099]{1057542,528771,4099,1}
  %1 = aten.linalg_vector_norm.default(%0, 1, [0, 2, 3], false, none) : f16[2]{1}
  return (%1)
}
)");
}

TEST(cuda_fuzz_sum_of_a_cat_split_into_chunks_of_one_row) {
  compiled_cuda(R"(graph {
  %0 = input(0) : f32[1,2,129,4099]{1057542,528771,4099,1}
  %1 = input(1) : f32[1,2,129,4099]{2,1,8198,2}
  %2 = aten.cat.default([%0, %1], 3) : f32[1,2,129,8198]{2115084,1057542,8198,1} internal
  %3 = aten.view.default(%2, [1, 2, 129, 2, 4099]) : f32[1,2,129,2,4099]{2115084,1057542,8198,4099,1}
  %4 = aten.sum.dim_IntList(%3, [0, 1, 2, 3, 4], false, none) : f32[]{}
  return (%4)
}
)");
}

// ptxas folded fabsf(x) >= 0.0f to true, dropping the load, though |NaN| >= 0 is false
// (seed 53425). Float abs is ember_abs_f32, a cleared sign bit on the GPU, which ptxas
// keeps (the compare stays in the SASS; checked with nvdisasm, not available in CI).
TEST(cuda_fuzz_abs_of_a_float_clears_the_sign_bit) {
  ember::CudaCode code = compiled_cuda(R"(graph {
  %0 = input(0) : f32[1,4,7]{28,7,1}
  %1 = aten.abs.default(%0) : f32[1,4,7]{28,7,1}
  %2 = aten.ge.Scalar(%1, 0.0) : bool[1,4,7]{28,7,1}
  return (%2)
}
)");
  CHECK(code.source.find("ember_abs_f32(") != std::string::npos);
  CHECK(code.source.find("fabsf(t") == std::string::npos);
  CHECK(code.source.find("__float_as_int(x) & 0x7fffffff") != std::string::npos);
}

// NVVM compiled (b - a) > 0 of int64 values as b > a (signed overflow is undefined in
// C++ and NVRTC has no -fwrapv), wrong where b - a wraps (seed 40518: 3242 of 28672
// elements). Integer arithmetic on loaded values is unsigned now; index arithmetic
// (vars and sizes only) stays signed.
TEST(cuda_fuzz_int64_difference_wraps_before_the_compare) {
  ember::CudaCode code = compiled_cuda(R"(graph {
  %0 = input(0) : i64[7,64,64]{4096,64,1}
  %1 = input(1) : i64[7,64,64]{37635,193,3}
  %2 = aten.sub.Tensor(%1, %0, 1) : i64[7,64,64]{4096,64,1}
  %3 = aten.gt.Scalar(%2, 0) : bool[7,64,64]{4096,64,1}
  return (%3)
}
)");
  CHECK(code.source.find("(int64_t)((unsigned long long)(t5) - (unsigned long long)(t10))") != std::string::npos);
  CHECK(code.source.find("= o0 * 37635LL;") != std::string::npos);
}

// The 2-norm of one element squared it: |x| = 8.3e24, x * x = inf in f32, where eager
// gives |x| (seed 40519). Over one element a p-norm is |x|, taken as a max.
TEST(cuda_fuzz_norm_of_one_element_is_its_magnitude) {
  ember::CudaCode code = compiled_cuda(R"(graph {
  %0 = input(0) : f32[]{}
  %1 = aten.expm1.default(%0) : f32[]{}
  %2 = aten.linalg_vector_norm.default(%1, 2, [], false, none) : f32[]{}
  %3 = input(1) : f32[3,1]{1,1}
  %4 = aten.linalg_vector_norm.default(%3, 3, [1], true, none) : f32[3,1]{1,1}
  return (%2, %4)
}
)");
  CHECK(code.source.find("sqrtf(") == std::string::npos);
  CHECK(code.source.find("powf(") == std::string::npos);
}

// GPU fuzz seed 169125: a transpose kernel's phases were loops of 65 steps, fully unrolled,
// and NVRTC 13.0's ptxas (-O3) dropped the stores of steps 35 to 63 when the stored value
// was a uniform select (the mask true). A phase now unrolls at most 16 steps.
TEST(cuda_fuzz_transpose_phase_unrolls_at_most_16_steps) {
  ember::CudaCode code = compiled_cuda(R"(graph {
  %0 = input(0) : f16[]{}
  %1 = input(1) : i8[129,4099]{1,129}
  %2 = aten.signbit.default(%0) : bool[]{}
  %3 = aten.scalar_tensor.default(1, "i8", "strided", "cpu", none) : i8[]{}
  %4 = aten.where.self(%2, %3, %1) : i8[129,4099]{1,129}
  %5 = aten.clone.default(%4, "contiguous_format") : i8[129,4099]{4099,1}
  %6 = aten.fmod.Scalar(%5, -3) : i8[129,4099]{4099,1}
  return (%6)
}
)");
  CHECK(code.source.find("#pragma unroll 16\n") != std::string::npos);
  CHECK(code.source.find("for (int u = 0; u < 65;") != std::string::npos);
}
