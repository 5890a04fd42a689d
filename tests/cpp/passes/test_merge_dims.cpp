// merge_inner_dims and merge_symbolic_outer_dims: program and schedule text in,
// schedule text out.
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;
using ember_test::schedule_part;

TEST(merge_inner_dims_of_a_contiguous_reduction) {
  // Global average pooling: the [H, W] reduction becomes one 64-long loop.
  CHECK_EQ(schedule_part(after(R"IR(program(vars=6)
buf0 = input(0) : f32[2,3,8,8]{192,64,8,1}
buf1 : f32[2,3,1,1]{3,1,1,1} for [v0, v1, _, _] = sum f32 over [8,8] for [v2, v3] of buf0[((((v0 * 192) + (v1 * 64)) + (v2 * 8)) + v3)]  from %1
buf2 : f32[2,3,1,1]{3,1,1,1} for [v4, v5, _, _] = div(buf1[((v4 * 3) + v5)], 64.0)  from %1
return buf2
schedule
kernel ember_k0 outer=[2,3]
  stage 0 inner=[8,8]: buf1(sum)
    reduce buf1[((o0 * 3) + o1)] = buf0[((((o0 * 192) + (o1 * 64)) + (i0 * 8)) + i1)]
  stage 1 inner=[]: buf2
    buf2[((o0 * 3) + o1)] = div(buf1[((o0 * 3) + o1)], 64.0)
)IR", {"merge_inner_dims"})),
           "kernel ember_k0 outer=[2,3]\n"
           "  stage 0 inner=[64]: buf1(sum)\n"
           "    reduce buf1[((o0 * 3) + o1)] = buf0[(((o0 * 192) + (o1 * 64)) + i0)]\n"
           "  stage 1 inner=[]: buf2\n"
           "    buf2[((o0 * 3) + o1)] = div(buf1[((o0 * 3) + o1)], 64.0)\n");
}

TEST(merge_inner_dims_leaves_padded_dims) {
  // The bounds test uses the loop vars outside a memory index: no merge.
  ember_test::Pipeline p(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.constant_pad_nd.default(%0, [1, 1, 1, 1], 0.0) : f32[6,8]{8,1}
  %2 = aten.sum.dim_IntList(%1, [0, 1], true, none) : f32[1,1]{1,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule.kernels[0].stages[0].inner.size(), 2u);
}

namespace {

const std::vector<std::string> kFused = {"lower_graph", "eliminate_dead_code", "fuse", "merge_inner_dims"};

std::string outer_after_merge(const char* graph) {
  const std::string state = after(graph, kFused, ember::PipelineOptions::cuda());
  const std::string merged = ember::schedule_summary(schedule_part(after(state, {"merge_symbolic_outer_dims"})));
  return merged.substr(0, merged.find('\n'));
}

}  // namespace

TEST(merge_symbolic_outer_dims_of_a_contiguous_pointwise_kernel) {
  // [s0, s1] rows of 3072, contiguous: o0 * 3072*s1 + o1 * 3072 walks them as one dim
  // of s0*s1 rows, whose index is o0 * 3072. The pass alone, on program and schedule text.
  CHECK_EQ(schedule_part(after(R"IR(program(s0=3, s1=4; vars=3)
buf0 = input(2) : f32[s0,s1,3072]{3072*s1,3072,1}
buf1 : f32[s0,s1,3072]{3072*s1,3072,1} for [v0, v1, v2] = reciprocal(tanh(buf0[(((v0 * (3072 * s1)) + (v1 * 3072)) + v2)]))  from %4 %3
return buf1
schedule
kernel ember_k0 outer=[s0,s1]
  stage 0 inner=[3072]: buf1
    buf1[(((o0 * (3072 * s1)) + (o1 * 3072)) + i0)] = reciprocal(tanh(buf0[(((o0 * (3072 * s1)) + (o1 * 3072)) + i0)]))
)IR", {"merge_symbolic_outer_dims"}, ember::PipelineOptions::cuda())),
           "kernel ember_k0 outer=[s0*s1]\n"
           "  stage 0 inner=[3072]: buf1\n"
           "    buf1[((o0 * 3072) + i0)] = reciprocal(tanh(buf0[((o0 * 3072) + i0)]))\n");
}

TEST(merge_symbolic_outer_dims_when_indices_walk_them_as_one) {
  // GELU over [s0, s1, 3072]: its outer dims [s0, s1] are one dim of s0*s1 rows for
  // every index (coefficients 3072*s1 and 3072), symbolically.
  CHECK_EQ(outer_after_merge(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s0,s1,3072]{3072*s1,3072,1}
  %3 = aten.tanh.default(%2) : f32[s0,s1,3072]{3072*s1,3072,1}
  %4 = aten.reciprocal.default(%3) : f32[s0,s1,3072]{3072*s1,3072,1}
  return (%4)
}
)"),
           "kernel ember_k0 outer=[s0*s1]");
}

TEST(merge_symbolic_outer_dims_of_a_transposed_read_stay_apart) {
  // The input is read transposed ([s1, s0] in memory): its index has o0 * 3072 and
  // o1 * 3072*s0, not a single walk, so the dims stay (the per-row division remains).
  CHECK_EQ(outer_after_merge(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s1,s0,3072]{3072*s0,3072,1}
  %3 = aten.permute.default(%2, [1, 0, 2]) : f32[s0,s1,3072]{3072,3072*s0,1}
  %4 = aten.tanh.default(%3) : f32[s0,s1,3072]{3072*s1,3072,1}
  return (%4)
}
)"),
           "kernel ember_k0 outer=[s0,s1]");
}

TEST(merge_inner_dims_of_symbolic_sizes) {
  // A sum over [s0, s1] of a contiguous [4, s0, s1]: one loop of s0*s1, as at static sizes.
  ember_test::Pipeline p(R"(graph(s0=3, s1=5) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[4,s0,s1]{s0*s1,s1,1}
  %3 = aten.sum.dim_IntList(%2, [1, 2], false, none) : f32[4]{1}
  return (%3)
}
)");
  CHECK_EQ(p.schedule.kernels[0].stages[0].inner.size(), 1u);
  CHECK_EQ(ember::print_dims(p.schedule.kernels[0].stages[0].inner), "[s0*s1]");
}
