// Lowering, dead-code elimination and fusion, as before/expected text.
#include "check.h"
#include "pipeline_util.h"

using namespace ember;
using ember_test::Pipeline;

namespace {

const char* kLayerNorm = R"(graph {
  %0 = input(0) : f32[4,16]{16,1}
  %1 = input(1) : f32[16]{1}
  %2 = aten.var_mean.correction(%0, [1], 0, true) : (f32[4,1]{1,1}, f32[4,1]{1,1})
  %3 = aten.add.Tensor(%2, 1e-05, 1) : f32[4,1]{1,1}
  %4 = aten.rsqrt.default(%3) : f32[4,1]{1,1}
  %5 = aten.sub.Tensor(%0, %2.1, 1) : f32[4,16]{16,1}
  %6 = aten.mul.Tensor(%5, %4) : f32[4,16]{16,1}
  %7 = aten.mul.Tensor(%6, %1) : f32[4,16]{16,1}
  return (%7)
}
)";

}  // namespace

TEST(pointwise_chain_is_one_buffer) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,4]{4,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f32[8,4]{4,1}
  %2 = aten.exp.default(%1) : f32[8,4]{4,1}
  %3 = aten.add.Tensor(%2, %0, 1) : f32[8,4]{4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program_text(),
           "buf0 = input(0) : f32[8,4]\n"
           "buf1 : f32[8,4] = (exp((buf0[((v0 * 4) + v1)] * 2)) + buf0[((v0 * 4) + v1)])\n"
           "return buf1\n");
  CHECK_EQ(p.schedule.kernels.size(), 1u);
}

TEST(unsupported_op_becomes_extern_with_reason) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,4]{4,1}
  %1 = aten.relu.default(%0) : f32[4,4]{4,1}
  %2 = aten.mm.default(%1, %1) : f32[4,4]{4,1}
  %3 = aten.neg.default(%2) : f32[4,4]{4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program.externs.size(), 1u);
  CHECK_EQ(p.program.externs[0].reason, "matmul: ATen (BLAS)");
  // relu is realized for the extern, then neg runs in a second kernel after it.
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[4]: buf1\n"
           "extern aten.mm.default  # matmul: ATen (BLAS)\n"
           "kernel ember_k1 outer=[4]\n"
           "  stage 0 inner=[4]: buf3\n");
}

TEST(layer_norm_fuses_into_one_kernel_with_three_stages) {
  Pipeline p(kLayerNorm);
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[16]: buf2(sum)\n"
           "  stage 1 inner=[16]: buf3(sum)\n"
           "  stage 2 inner=[16]: buf4\n");
  // mean and variance stay in registers: only the input, weight and output are arguments.
  CHECK_EQ(p.code.kernels[0].args.size(), 3u);
  CHECK(!p.code.buffer_in_memory[2]);
  CHECK(!p.code.buffer_in_memory[3]);
}

TEST(fusion_disabled_gives_one_kernel_per_buffer) {
  Pipeline p(kLayerNorm, /*fuse=*/false);
  CHECK_EQ(p.schedule.kernels.size(), 3u);
  CHECK(p.code.buffer_in_memory[2]);
}

TEST(softmax_is_one_kernel) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[6,10]{10,1}
  %1 = aten._softmax.default(%0, -1, false) : f32[6,10]{10,1}
  return (%1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[6]\n"
           "  stage 0 inner=[10]: buf1(max)\n"
           "  stage 1 inner=[10]: buf2(sum)\n"
           "  stage 2 inner=[10]: buf3\n");
}

TEST(transposed_read_is_not_fused) {
  // b reads a at a transposed index: other threads' rows, so a separate kernel.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,8]{8,1}
  %1 = aten.exp.default(%0) : f32[8,8]{8,1}
  %2 = aten.permute.default(%1, [1, 0]) : f32[8,8]{1,8}
  %3 = aten.add.Tensor(%1, %2, 1) : f32[8,8]{8,1}
  return (%3, %1)
}
)");
  CHECK_EQ(p.schedule.kernels.size(), 2u);
}

TEST(unused_pool_indices_are_dead) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[1,2,4,4]{32,16,4,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [2, 2], [2, 2], [0, 0], [1, 1], false) : (f32[1,2,2,2]{8,4,2,1}, i64[1,2,2,2]{8,4,2,1})
  return (%1)
}
)");
  // A 2x2 window is unrolled into one pointwise kernel vectorized along the output
  // width; the unrolled indices, unused, are never computed.
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2,2]\n"
           "  stage 0 inner=[2]: buf1\n");
}

TEST(views_of_inputs_stay_strided) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.permute.default(%0, [1, 0]) : f32[6,4]{1,6}
  %2 = aten.slice.Tensor(%1, 0, 1, 5, 2) : f32[2,4]{2,6}
  %3 = aten.neg.default(%2) : f32[2,4]{4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program_text(),
           "buf0 = input(0) : f32[4,6]\n"
           "buf1 : f32[2,4] = neg(buf0[(((v0 * 2) + (v1 * 6)) + 1)])\n"
           "return buf1\n");
}

TEST(generated_code_golden_layer_norm) {
  Pipeline p(kLayerNorm);
  CHECK(ember_test::matches_golden("layer_norm.c", p.code.source));
}

TEST(generated_code_golden_max_pool) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[1,2,5,5]{50,25,5,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [3, 3], [2, 2], [1, 1], [1, 1], false) : (f32[1,2,3,3]{18,9,3,1}, i64[1,2,3,3]{18,9,3,1})
  return (%1, %1.1)
}
)");
  CHECK(ember_test::matches_golden("max_pool.c", p.code.source));
}

TEST(contiguous_inner_dims_merge) {
  // Global average pooling: the [H, W] reduction becomes one 64-long loop.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,3,8,8]{192,64,8,1}
  %1 = aten.mean.dim(%0, [-1, -2], true) : f32[2,3,1,1]{3,1,1,1}
  return (%1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2,3]\n"
           "  stage 0 inner=[64]: buf1(sum)\n"
           "  stage 1 inner=[]: buf2\n");
}

TEST(padded_dims_do_not_merge) {
  // The bounds test uses the loop vars outside a memory index: no merge.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.constant_pad_nd.default(%0, [1, 1, 1, 1], 0.0) : f32[6,8]{8,1}
  %2 = aten.sum.dim_IntList(%1, [0, 1], true, none) : f32[1,1]{1,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule.kernels[0].stages[0].inner.size(), 2u);
}

TEST(channels_last_spatial_mean_is_a_vector_reduction) {
  // NHWC input: C is contiguous, so C is the vectorized loop and H*W loops outside.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,32,8,8]{2048,1,256,32}
  %1 = aten.relu.default(%0) : f32[2,32,8,8]{2048,1,256,32}
  %2 = aten.mean.dim(%1, [-1, -2], true) : f32[2,32,1,1]{32,1,1,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2]\n"
           "  stage 0 vector inner=[32,64]: buf1(sum)\n"
           "  stage 1 inner=[32]: buf2\n");
}

TEST(column_sum_is_a_vector_reduction) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[100,64]{64,1}
  %1 = aten.sum.dim_IntList(%0, [0], false, none) : f32[64]{1}
  return (%1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector inner=[64,100]: buf1(sum)\n");
}

TEST(cumsum_is_a_scan_fused_with_its_consumer) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,10]{10,1}
  %1 = aten.cumsum.default(%0, 1, none) : f32[4,10]{10,1}
  %2 = aten.mul.Tensor(%1, 2.0) : f32[4,10]{10,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[10]: buf1(scan sum) buf2\n");
  // The running sum feeds the multiply directly and never touches memory.
  CHECK(!p.code.buffer_in_memory[1]);
}
