// fuse: program text in, schedule text out (schedule/schedule_text.h).
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;
using ember_test::schedule_part;

namespace {

// LayerNorm without bias, after lowering: mean, variance and the mean's correction (the
// deviations' sum), normalized output.
const char* kLayerNormProgram = R"IR(program(vars=8)
buf0 = input(0) : f32[4,16]{16,1}
buf1 = input(1) : f32[16]{1}
buf2 : f32[4,1]{1,1} for [v0, _] = sum f32 over [16] for [v1] of buf0[((v0 * 16) + v1)]  from %2
buf3 : f32[4,1]{1,1} for [v2, _] = sum f32 over [16] for [v3] of (sub(buf0[((v2 * 16) + v3)], div(buf2[v2], 16.0)) * sub(buf0[((v2 * 16) + v3)], div(buf2[v2], 16.0)))  from %2
buf4 : f32[4,1]{1,1} for [v4, _] = sum f32 over [16] for [v5] of sub(buf0[((v4 * 16) + v5)], div(buf2[v4], 16.0))  from %2
buf5 : f32[4,16]{16,1} for [v6, v7] = ((sub(buf0[((v6 * 16) + v7)], where(isnan(buf3[v6]), nan, (div(buf2[v6], 16.0) + div(buf4[v6], 16.0)))) * rsqrt((div(buf3[v6], 16.0) + 9.9999997473787516e-06))) * buf1[v7])  from %7 %6 %5 %2 %4 %3 %2
return buf5
)IR";

std::string summary_after(const std::string& graph, const std::vector<std::string>& passes) {
  return ember::schedule_summary(schedule_part(after(graph, passes)));
}

const std::vector<std::string> kFront = {"lower_graph", "eliminate_dead_code", "fuse", "merge_inner_dims"};

}  // namespace

TEST(fuse_layer_norm_into_one_kernel_of_three_stages) {
  // mean, variance and the mean's correction are reductions read by later stages of the
  // same rows; the last two read the same deviations, in one stage.
  CHECK_EQ(schedule_part(after(kLayerNormProgram, {"fuse"})),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[16]: buf2(sum)\n"
           "    reduce buf2[o0] = buf0[((o0 * 16) + i0)]\n"
           "  stage 1 inner=[16]: buf3(sum) buf4(sum)\n"
           "    reduce buf3[o0] = (sub(buf0[((o0 * 16) + i0)], div(buf2[o0], 16.0)) * sub(buf0[((o0 * 16) + i0)], div(buf2[o0], 16.0)))\n"
           "    reduce buf4[o0] = sub(buf0[((o0 * 16) + i0)], div(buf2[o0], 16.0))\n"
           "  stage 2 inner=[16]: buf5\n"
           "    buf5[((o0 * 16) + i0)] = ((sub(buf0[((o0 * 16) + i0)], where(isnan(buf3[o0]), nan, (div(buf2[o0], 16.0) + "
           "div(buf4[o0], 16.0)))) * rsqrt((div(buf3[o0], 16.0) + 9.9999997473787516e-06))) * buf1[i0])\n");
}

TEST(fuse_disabled_gives_one_kernel_per_buffer) {
  ember::PipelineOptions unfused = ember_test::unfused();
  CHECK_EQ(ember::schedule_summary(schedule_part(after(kLayerNormProgram, {"fuse"}, unfused))),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[16]: buf2(sum)\n"
           "kernel ember_k1 outer=[4]\n"
           "  stage 0 inner=[16]: buf3(sum)\n"
           "kernel ember_k2 outer=[4]\n"
           "  stage 0 inner=[16]: buf4(sum)\n"
           "kernel ember_k3 outer=[4]\n"
           "  stage 0 inner=[16]: buf5\n");
}

TEST(fuse_softmax_into_one_kernel) {
  CHECK_EQ(summary_after(R"(graph {
  %0 = input(0) : f32[6,10]{10,1}
  %1 = aten._softmax.default(%0, -1, false) : f32[6,10]{10,1}
  return (%1)
}
)", kFront),
           "kernel ember_k0 outer=[6]\n"
           "  stage 0 inner=[10]: buf1(max)\n"
           "  stage 1 inner=[10]: buf2(sum)\n"
           "  stage 2 inner=[10]: buf3\n");
}

TEST(fuse_keeps_a_transposed_read_apart) {
  // The add reads exp's result at a transposed index: other threads' rows, so a
  // separate kernel.
  CHECK_EQ(summary_after(R"(graph {
  %0 = input(0) : f32[8,8]{8,1}
  %1 = aten.exp.default(%0) : f32[8,8]{8,1}
  %2 = aten.permute.default(%1, [1, 0]) : f32[8,8]{1,8}
  %3 = aten.add.Tensor(%1, %2, 1) : f32[8,8]{8,1}
  return (%3, %1)
}
)", kFront),
           "kernel ember_k0 outer=[8]\n"
           "  stage 0 inner=[8]: buf1\n"
           "kernel ember_k1 outer=[8]\n"
           "  stage 0 inner=[8]: buf2\n");
}

TEST(fuse_a_pool_unrolled_into_one_pointwise_kernel) {
  // A 2x2 window is unrolled into one pointwise kernel vectorized along the output width.
  CHECK_EQ(summary_after(R"(graph {
  %0 = input(0) : f32[1,2,4,4]{32,16,4,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [2, 2], [2, 2], [0, 0], [1, 1], false) : (f32[1,2,2,2]{8,4,2,1}, i64[1,2,2,2]{8,4,2,1})
  return (%1)
}
)", kFront),
           "kernel ember_k0 outer=[2,2]\n"
           "  stage 0 inner=[2]: buf1\n");
}

TEST(fuse_a_transposed_pool_input_in_its_own_kernel) {
  CHECK_EQ(summary_after(R"(graph {
  %0 = input(0) : f32[2,4,8,8]{256,1,32,4}
  %1 = aten.relu.default(%0) : f32[2,4,8,8]{256,64,8,1}
  %2 = aten.max_pool2d_with_indices.default(%1, [2, 2], [], [0, 0], [1, 1], false) : (f32[2,4,4,4]{64,16,4,1}, i64[2,4,4,4]{64,16,4,1})
  return (%2, %2.1)
}
)", kFront),
           "kernel ember_k0 outer=[2,4,8]\n"
           "  stage 0 inner=[8]: buf1\n"
           "kernel ember_k1 outer=[2,4,4]\n"
           "  stage 0 inner=[4]: buf2 buf3\n");
}

TEST(fuse_a_channels_last_spatial_mean_into_a_vector_reduction) {
  // NHWC input: C is contiguous, so C is the vectorized loop and H*W loops outside.
  CHECK_EQ(summary_after(R"(graph {
  %0 = input(0) : f32[2,32,8,8]{2048,1,256,32}
  %1 = aten.relu.default(%0) : f32[2,32,8,8]{2048,1,256,32}
  %2 = aten.mean.dim(%1, [-1, -2], true) : f32[2,32,1,1]{32,1,1,1}
  return (%2)
}
)", kFront),
           "kernel ember_k0 outer=[2]\n"
           "  stage 0 vector inner=[32,64]: buf1(sum)\n"
           "  stage 1 inner=[32]: buf2\n");
}

TEST(fuse_a_column_sum_into_a_vector_reduction) {
  CHECK_EQ(summary_after(R"(graph {
  %0 = input(0) : f32[100,64]{64,1}
  %1 = aten.sum.dim_IntList(%0, [0], false, none) : f32[64]{1}
  return (%1)
}
)", kFront),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector inner=[64,100]: buf1(sum)\n");
}

TEST(fuse_a_cumsum_with_its_consumer) {
  const char* graph = R"(graph {
  %0 = input(0) : f32[4,10]{10,1}
  %1 = aten.cumsum.default(%0, 1, none) : f32[4,10]{10,1}
  %2 = aten.mul.Tensor(%1, 2.0) : f32[4,10]{10,1}
  return (%2)
}
)";
  CHECK_EQ(summary_after(graph, kFront),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[10]: buf1(scan sum) buf2\n");
  // The running sum feeds the multiply directly and never touches memory.
  ember_test::Pipeline p(graph);
  CHECK(!p.c_code.buffer_in_memory[1]);
}

TEST(fuse_a_scan_epilogue_whose_loops_are_in_another_order) {
  // Scans along the middle dim loop over [2, 4] rows (batch, channel) and the 4 steps
  // inside; their product is a [batch, time, channel] value. Mapped by position its time
  // would be the kernel's channel (both are 4 long), and the read of the scans would miss
  // their element; mapped by the scans' store index it joins their stage, and neither
  // scan is stored.
  const char* graph = R"(graph {
  %0 = input(0) : f32[2,4,4]{16,4,1}
  %1 = aten.cumsum.default(%0, 1, none) : f32[2,4,4]{16,4,1}
  %2 = aten.logcumsumexp.default(%0, 1) : f32[2,4,4]{16,4,1}
  %3 = aten.mul.Tensor(%1, %2) : f32[2,4,4]{16,4,1}
  return (%3)
}
)";
  CHECK_EQ(summary_after(graph, kFront),
           "kernel ember_k0 outer=[2,4]\n"
           "  stage 0 inner=[4]: buf1(scan sum) buf2(scan logsumexp) buf3\n");
  ember_test::Pipeline p(graph);
  CHECK(!p.c_code.buffer_in_memory[1] && !p.c_code.buffer_in_memory[2]);
}

TEST(fuse_cuda_keeps_a_column_variance_apart_from_its_mean) {
  // A training BatchNorm's statistics over a channels-last activation: the variance's
  // deviations read the mean. On one row (no outer dims) CUDA splits each column
  // reduction across blocks, which it can only do when the variance's kernel does not
  // compute the mean it reads; the CPU keeps them in one kernel.
  const std::string graph = R"(graph {
  %0 = input(0) : f32[8,64,32,32]{65536,1,2048,64}
  %1 = aten.var_mean.correction(%0, [0, 2, 3], 0, true) : (f32[1,64,1,1]{64,1,1,1}, f32[1,64,1,1]{64,1,1,1})
  return (%1, %1.1)
}
)";
  CHECK_EQ(ember::schedule_summary(schedule_part(after(graph, kFront, ember::PipelineOptions::cuda()))),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector inner=[64,8192]: buf1(sum)\n"
           "kernel ember_k1 outer=[]\n"
           "  stage 0 vector inner=[64,8192]: buf2(sum) buf3(sum)\n"
           "  stage 1 inner=[64]: buf4 buf5\n");
  CHECK_EQ(summary_after(graph, kFront),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector inner=[64,8192]: buf1(sum)\n"
           "  stage 1 vector inner=[64,8192]: buf2(sum) buf3(sum)\n"
           "  stage 2 inner=[64]: buf4 buf5\n");
}
