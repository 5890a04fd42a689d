// order_reduced_dims and split_long_reductions: graph text in, program text out. The
// kernels they lead to are checked in tests/cpp/test_cuda_codegen.cpp (NVRTC) and their
// values on the GPU in tests/python/test_cuda_runtime.py.
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;

namespace {

std::string lowered(const std::string& graph, const std::vector<std::string>& passes) {
  std::vector<std::string> all = {"lower_graph"};
  all.insert(all.end(), passes.begin(), passes.end());
  return after(graph, all, ember::PipelineOptions::cuda());
}

const std::vector<std::string> kBoth = {"order_reduced_dims", "split_long_reductions"};

}  // namespace

TEST(order_reduced_dims_walks_a_channels_last_slice_in_memory_order) {
  // A sum over [C, H, W] of a channels-last tensor: C is contiguous, so it goes innermost
  // (then H, stride 32, outside W, stride 8).
  CHECK_EQ(lowered(R"(graph {
  %0 = input(0) : f32[2,8,4,4]{128,1,32,8}
  %1 = aten.sum.dim_IntList(%0, [1, 2, 3], true) : f32[2,1,1,1]{1,1,1,1}
  return (%1)
}
)", {"order_reduced_dims"}),
           "program(vars=4)\n"
           "buf0 = input(0) : f32[2,8,4,4]{128,1,32,8}\n"
           "buf1 : f32[2,1,1,1]{1,1,1,1} for [v0, _, _, _] = sum f32 over [4,4,8] for [v2, v3, v1] of "
           "buf0[((((v0 * 128) + v1) + (v2 * 32)) + (v3 * 8))]  from %1\n"
           "return buf1\n");
}

TEST(order_reduced_dims_leaves_a_contiguous_slice_alone) {
  const char* graph = R"(graph {
  %0 = input(0) : f32[2,8,4,4]{128,16,4,1}
  %1 = aten.sum.dim_IntList(%0, [1, 2, 3], true) : f32[2,1,1,1]{1,1,1,1}
  return (%1)
}
)";
  CHECK_EQ(lowered(graph, {"order_reduced_dims"}), lowered(graph, {}));
}

TEST(split_long_reductions_cuts_a_loss_into_512_chunks) {
  // A training loss: the mean square of a whole output, one result. Dim 0 (8) is taken
  // whole, dim 1 (512) cut into 64 chunks of 8 rows: 512 partials of 32,768 elements,
  // every index affine; the mean then reads the 512 partials.
  CHECK_EQ(lowered(R"(graph {
  %0 = input(0) : bf16[8,512,4096]{2097152,4096,1}
  %1 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[8,512,4096]{2097152,4096,1}
  %2 = aten.pow.Tensor_Scalar(%1, 2) : f32[8,512,4096]{2097152,4096,1}
  %3 = aten.mean.default(%2) : f32[]{}
  return (%3)
}
)", kBoth),
           "program(vars=9)\n"
           "buf0 = input(0) : bf16[8,512,4096]{2097152,4096,1}\n"
           "buf3 : f32[1,1,1,8,64]{512,512,512,64,1} for [_, _, _, v3, v4] = sum f32 over [8,4096] for [v5, v6] of "
           "(f32(buf0[(((v3 * 2097152) + (((v4 * 8) + v5) * 4096)) + v6)]) * "
           "f32(buf0[(((v3 * 2097152) + (((v4 * 8) + v5) * 4096)) + v6)]))  from %1 %2 %3\n"
           "buf1 : f32[1,1,1]{1,1,1} for [_, _, _] = sum f32 over [8,64] for [v7, v8] of buf3[((v7 * 64) + v8)]  from %1 %2 %3\n"
           "buf2 : f32[]{} for [] = div(buf1[0], 16777216.0)  from %3\n"
           "return buf2\n");
}

TEST(split_long_reductions_orders_then_cuts_a_channels_last_group) {
  // poolformer's GroupNorm(1, C) statistics (here a max): a result per image, its slice
  // put in memory order (C innermost), then H cut into 8 chunks: 64 x 8 partial rows.
  CHECK_EQ(lowered(R"(graph {
  %0 = input(0) : bf16[64,64,56,56]{200704,1,3584,64}
  %1 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[64,64,56,56]{200704,1,3584,64}
  %2 = aten.amax.default(%1, [1, 2, 3], true) : f32[64,1,1,1]{1,1,1,1}
  return (%2)
}
)", kBoth),
           "program(vars=10)\n"
           "buf0 = input(0) : bf16[64,64,56,56]{200704,1,3584,64}\n"
           "buf2 : f32[64,1,1,1,8]{8,8,8,8,1} for [v4, _, _, _, v5] = max f32 over [7,56,64] for [v6, v7, v8] of "
           "f32(buf0[((((v4 * 200704) + v8) + (((v5 * 7) + v6) * 3584)) + (v7 * 64))])  from %1 %2\n"
           "buf1 : f32[64,1,1,1]{1,1,1,1} for [v0, _, _, _] = max f32 over [8] for [v9] of buf2[((v0 * 8) + v9)]  from %1 %2\n"
           "return buf1\n");
}

TEST(split_long_reductions_leaves_short_slices_many_results_and_strided_slices) {
  // 4 results of 16,384 (short enough for one block each); 512 results of 65,536 (the
  // rows fill the GPU); a column sum (its slice strided: the vector stage's column split).
  for (const char* graph : {R"(graph {
  %0 = input(0) : f32[4,16384]{16384,1}
  %1 = aten.sum.dim_IntList(%0, [1], true) : f32[4,1]{1,1}
  return (%1)
}
)",
                            R"(graph {
  %0 = input(0) : f32[512,65536]{65536,1}
  %1 = aten.sum.dim_IntList(%0, [1], true) : f32[512,1]{1,1}
  return (%1)
}
)",
                            R"(graph {
  %0 = input(0) : f32[65536,4]{4,1}
  %1 = aten.sum.dim_IntList(%0, [0], true) : f32[1,4]{4,1}
  return (%1)
}
)"})
    CHECK_EQ(lowered(graph, kBoth), lowered(graph, {}));
}

TEST(split_long_reductions_leaves_arg_reductions_and_graphs_with_symbols) {
  const char* argmax = R"(graph {
  %0 = input(0) : f32[1048576]{1}
  %1 = aten.argmax.default(%0, 0, false) : i64[]{}
  return (%1)
}
)";
  CHECK_EQ(lowered(argmax, kBoth), lowered(argmax, {}));
  // A static sum in a graph with symbols: generic paths compare static twins made
  // without these passes.
  const char* symbolic = R"(graph(s0=2) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f32[s0,8]{8,1}
  %2 = input(2) : f32[1048576]{1}
  %3 = aten.sum.default(%2) : f32[]{}
  %4 = aten.sum.dim_IntList(%1, [1], false) : f32[s0]{1}
  return (%3, %4)
}
)";
  CHECK_EQ(lowered(symbolic, kBoth), lowered(symbolic, {}));
}

TEST(split_long_reductions_cuts_channels_last_columns_into_rows_of_partials) {
  // A training BatchNorm's mean over a channels-last activation: 64 contiguous channels,
  // each reduced over 32 x 56 x 56 rows 64 elements apart. The batch and H dims are taken
  // whole: partials [32, 56, 64] (1,792 chunk rows of 64 columns, 56 rows each, laid out
  // chunks first), which the sum then reduces as a column reduction over 1,792 rows.
  CHECK_EQ(lowered(R"(graph {
  %0 = input(0) : f32[32,64,56,56]{200704,1,3584,64}
  %1 = aten.sum.dim_IntList(%0, [0, 2, 3], true) : f32[1,64,1,1]{64,1,1,1}
  return (%1)
}
)", kBoth),
           "program(vars=10)\n"
           "buf0 = input(0) : f32[32,64,56,56]{200704,1,3584,64}\n"
           "buf2 : f32[32,56,1,64,1,1]{3584,64,64,1,1,1} for [v5, v6, _, v4, _, _] = sum f32 over [56] for [v7] of "
           "buf0[((((v5 * 200704) + v4) + (v6 * 3584)) + (v7 * 64))]  from %1\n"
           "buf1 : f32[1,64,1,1]{64,1,1,1} for [_, v1, _, _] = sum f32 over [32,56] for [v8, v9] of "
           "buf2[(((v8 * 3584) + (v9 * 64)) + v1)]  from %1\n"
           "return buf1\n");
}

TEST(split_long_reductions_leaves_short_columns_alone) {
  // 4,096 rows of 768 columns (a linear layer's bias gradient): 3.1 million elements, under
  // kSplitMinColumnWork; the CUDA column split takes it whole.
  const char* graph = R"(graph {
  %0 = input(0) : f32[4096,768]{768,1}
  %1 = aten.sum.dim_IntList(%0, [0], false) : f32[768]{1}
  return (%1)
}
)";
  CHECK_EQ(lowered(graph, kBoth), lowered(graph, {"order_reduced_dims"}));
}
