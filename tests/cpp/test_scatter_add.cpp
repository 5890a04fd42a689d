// index_add and scatter_add on CUDA as ember's scatter-add (lower/program.h,
// ComputedBuffer::add_at): a kernel over the values that adds each one atomically into an
// f32 buffer its first launch zeroes, the values' producer computed in that kernel; ATen's
// call under deterministic algorithms and on the CPU. The source compiles with NVRTC where
// it can be loaded (test_cuda_codegen.cpp says how).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "check.h"
#include "nvrtc_util.h"
#include "codegen/cuda/kernel.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"

using ember_test::check_compiles;

using ember::CudaKernelInfo;
using ember_test::count;

namespace {

// gather_block's forward (benchmarks/suite/models_blocks.py): buckets computed from the
// indices, the projection's output (here relu(h) * 2, a pointwise producer) added into zeros.
const char* kIndexAddIntoZeros = R"(graph {
  %0 = input(0) : f32[1000,64]{64,1}
  %1 = input(1) : i64[1000]{1}
  %2 = aten.mul.Tensor(%1, 7) : i64[1000]{1}
  %3 = aten.add.Tensor(%2, 3, 1) : i64[1000]{1}
  %4 = aten.remainder.Scalar(%3, 50) : i64[1000]{1}
  %5 = aten.full.default([50, 64], 0.0, "f32", none, "cuda", false) : f32[50,64]{64,1}
  %6 = aten.relu.default(%0) : f32[1000,64]{64,1}
  %7 = aten.mul.Tensor(%6, 2.0) : f32[1000,64]{64,1}
  %8 = aten.index_add.default(%5, 0, %1, %7, 1) : f32[50,64]{64,1}
  %9 = aten.index_add.default(%5, 0, %4, %0, 1) : f32[50,64]{64,1}
  return (%8, %9)
}
)";

// bf16 values added into a bf16 `self` that is not zero, with alpha: the sum in f32, self
// added and rounded by the kernel that stores the result.
const char* kIndexAddBf16 = R"(graph {
  %0 = input(0) : bf16[30,16]{16,1}
  %1 = input(1) : i64[100]{1}
  %2 = input(2) : bf16[100,16]{16,1}
  %3 = aten.index_add.default(%0, 0, %1, %2, 0.5) : bf16[30,16]{16,1}
  return (%3)
}
)";

// gather's backward: scatter_add of the gradient into zeros along dim 1 (63 x 31 elements:
// zeroed one float at a time).
const char* kScatterAdd = R"(graph {
  %0 = input(0) : f32[63,8]{8,1}
  %1 = input(1) : i64[63,8]{8,1}
  %2 = aten.full.default([63, 31], 0.0, "f32", none, "cuda", false) : f32[63,31]{31,1}
  %3 = aten.scatter_add.default(%2, 1, %1, %0) : f32[63,31]{31,1}
  return (%3)
}
)";

// x[i, j] += v: index_put with two indices and accumulation (one index arrives as index_add).
const char* kIndexPutTwoIndices = R"(graph {
  %0 = input(0) : f32[20,30,8]{240,8,1}
  %1 = input(1) : i64[100]{1}
  %2 = input(2) : i64[100]{1}
  %3 = input(3) : f32[100,8]{8,1}
  %4 = aten.index_put.default(%0, [%1, %2], %3, true) : f32[20,30,8]{240,8,1}
  %5 = aten.index_put.default(%0, [%1, %2], %3, false) : f32[20,30,8]{240,8,1}
  return (%4, %5)
}
)";

// A graph with a symbol elsewhere (a dynamic batch): its static index_add is still a
// scatter-add, not a reason to run the whole graph eagerly.
const char* kIndexAddBesideSymbols = R"(graph(s0=8) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f32[s0,16]{16,1}
  %2 = input(2) : i64[100]{1}
  %3 = input(3) : f32[100,16]{16,1}
  %4 = aten.full.default([30, 16], 0.0, "f32", none, "cuda", false) : f32[30,16]{16,1}
  %5 = aten.index_add.default(%4, 0, %2, %3, 1) : f32[30,16]{16,1}
  %6 = aten.exp.default(%1) : f32[s0,16]{16,1}
  return (%5, %6)
}
)";

const char* kIndexAddI64 = R"(graph {
  %0 = input(0) : i64[30,16]{16,1}
  %1 = input(1) : i64[100]{1}
  %2 = input(2) : i64[100,16]{16,1}
  %3 = aten.index_add.default(%0, 0, %1, %2, 1) : i64[30,16]{16,1}
  return (%3)
}
)";

int externs_named(const ember::Program& p, const std::string& op) {
  int n = 0;
  for (const auto& st : p.steps)
    if (st.kind == ember::Step::Kind::Extern && p.externs[st.index].op == op) ++n;
  return n;
}

int scatter_kernels(const ember::Schedule& s) {
  int n = 0;
  for (const auto& k : s.kernels) n += k.scatter_adds();
  return n;
}

}  // namespace

// Lowered: two scatter-adds over the values' [1000, 64], each adding at the bucket's row
// (the computed buckets clamped, with 0 added for one out of range), the value computed in
// the same step (relu(h) * 2, no buffer of its own); the zeros are no step at all.
TEST(scatter_add_lowers_index_add_over_the_values) {
  const std::string program = ember_test::after(kIndexAddIntoZeros, {"lower_graph"}, ember::PipelineOptions::cuda());
  CHECK_EQ(count(program, "scatter_add over [1000,64]"), 2);
  CHECK_EQ(count(program, "aten.index_add"), 0);
  CHECK_EQ(count(program, "(max(buf0[((v0 * 64) + v1)], 0.0) * 2.0)"), 1);  // relu(h) * 2 in the first one's body
  CHECK_EQ(count(program, " for ["), 2);  // nothing else is computed
  // The computed buckets' range is known (mod 50), the input indices' is not: clamped, and
  // 0 added for an index out of range.
  CHECK_EQ(count(program, "at ((min(max(buf1[v0], 0), 49) * 64) + v1) of where(and(ge(buf1[v0], 0), lt(buf1[v0], 50))"), 1);
  CHECK_EQ(count(program, "at ((mod(((buf1[v4] * 7) + 3), 50) * 64) + v5) of buf0[((v4 * 64) + v5)]"), 1);
  // The text reads back: fusion from it gives the same schedule as from the graph.
  const std::string from_text = ember_test::schedule_part(ember_test::after(program, {"fuse"}, ember::PipelineOptions::cuda()));
  const std::string from_graph =
      ember_test::schedule_part(ember_test::after(kIndexAddIntoZeros, {"lower_graph", "fuse"}, ember::PipelineOptions::cuda()));
  CHECK_EQ(from_text, from_graph);
  CHECK_EQ(count(from_graph, "(scatter_add)"), 2);
  CHECK_EQ(count(from_graph, "] += "), 2);
}

// Each scatter-add is a kernel of its own (nothing joins it), elementwise over the values,
// zeroing its buffer in a first launch; no ATen call is left. The atomic add is the CUDA
// prelude's, and the index's range test guards the computed buckets only.
TEST(scatter_add_cuda_kernels_zero_then_add) {
  ember_test::CudaPipeline c(kIndexAddIntoZeros);
  CHECK_EQ(externs_named(c.program, "aten.index_add.default"), 0);
  CHECK_EQ(c.cuda_code.kernels.size(), size_t{2});
  CHECK_EQ(scatter_kernels(c.schedule), 2);
  for (const CudaKernelInfo& k : c.cuda_code.kernels) {
    CHECK(k.shape == CudaKernelInfo::Shape::Elementwise);
    CHECK_EQ(k.partial_block, 256u);
    CHECK_EQ(k.partial_grid, 1u);  // 3,200 elements, 4,096 a block
    CHECK_EQ(k.hoisted_words, 0u);
  }
  CHECK_EQ(count(c.cuda_code.source, "ember_scatter_add(&"), 2 * 2);  // a unrolled tile and its tail, each
  CHECK_EQ(count(c.cuda_code.source, "_partial("), 2);
  CHECK_EQ(count(c.cuda_code.source, "reinterpret_cast<float4*>(b"), 2);  // 3,200 floats as 800 words
  CHECK_EQ(count(c.cuda_code.source, "[e] = 0.0f;"), 2);  // ... or one by one, unaligned
  CHECK(c.cuda_code.source.find("atomicAdd(p, v)") != std::string::npos);
  check_compiles(c.cuda_code);
}

// Under deterministic algorithms (and on the CPU) ATen adds: no atomics in the order of a race.
TEST(scatter_add_deterministic_and_cpu_keep_aten) {
  ember::PipelineOptions det = ember::PipelineOptions::cuda();
  det.deterministic = true;
  ember_test::CudaPipeline d(kIndexAddIntoZeros, det);
  CHECK_EQ(externs_named(d.program, "aten.index_add.default"), 2);
  CHECK_EQ(scatter_kernels(d.schedule), 0);
  ember_test::Pipeline cpu(kIndexAddIntoZeros);
  CHECK_EQ(externs_named(cpu.program, "aten.index_add.default"), 2);
  // Integers keep ATen's call (exact sums need no atomics of ours).
  ember_test::CudaPipeline ints(kIndexAddI64);
  CHECK_EQ(externs_named(ints.program, "aten.index_add.default"), 1);
}

// bf16: values summed in an f32 buffer (alpha applied), then self + sum rounded once by the
// kernel that stores the result, which reads self and the sum.
TEST(scatter_add_bf16_sums_in_f32_and_adds_self_after) {
  ember_test::CudaPipeline c(kIndexAddBf16);
  CHECK_EQ(externs_named(c.program, "aten.index_add.default"), 0);
  CHECK_EQ(c.cuda_code.kernels.size(), size_t{2});
  CHECK_EQ(scatter_kernels(c.schedule), 1);
  const std::string program = ember::print_program(c.program);
  CHECK_EQ(count(program, "scatter_add over [100,16]"), 1);
  CHECK_EQ(count(program, "* 0.5"), 1);
  CHECK_EQ(count(program, ":i64"), 0);  // self + the sum in f32
  CHECK(program.find(": f32[30,16]{16,1} for [") != std::string::npos);  // the sum's buffer
  check_compiles(c.cuda_code);
}

// scatter_add over the index's shape, adding at (row, index[row, j]).
TEST(scatter_add_lowers_scatter_add_along_dim_1) {
  ember_test::CudaPipeline c(kScatterAdd);
  CHECK_EQ(externs_named(c.program, "aten.scatter_add.default"), 0);
  CHECK_EQ(scatter_kernels(c.schedule), 1);
  const std::string program = ember::print_program(c.program);
  CHECK_EQ(count(program, "scatter_add over [63,8]"), 1);
  CHECK_EQ(count(program, "at ((v0 * 31) + min(max(buf1[((v0 * 8) + v1)], 0), 30))"), 1);
  CHECK_EQ(count(c.cuda_code.source, "[e] = 0.0f;"), 1);
  check_compiles(c.cuda_code);
}

// index_put(accumulate=True) over the indexed shape [100, 8]: negative indices wrap, then
// the range test; self (not zero) is added by the kernel that stores the result. Without
// accumulation (the last write wins) ATen runs it.
TEST(scatter_add_lowers_index_put_with_two_indices) {
  ember_test::CudaPipeline c(kIndexPutTwoIndices);
  CHECK_EQ(externs_named(c.program, "aten.index_put.default"), 1);
  CHECK_EQ(scatter_kernels(c.schedule), 1);
  const std::string program = ember::print_program(c.program);
  CHECK_EQ(count(program, "scatter_add over [100,8]"), 1);
  CHECK_EQ(count(program, "where(lt(buf1[v0], 0), (buf1[v0] + 20), buf1[v0])"), 3);  // range test and offset
  CHECK_EQ(count(program, "where(lt(buf2[v0], 0), (buf2[v0] + 30), buf2[v0])"), 3);
  // self + the sum, in f32 (not index arithmetic's i64)
  CHECK_EQ(count(program, "= (buf0[(((v2 * 240) + (v3 * 8)) + v4)] + buf4[(((v2 * 240) + (v3 * 8)) + v4)])  from %4"), 1);
  CHECK_EQ(count(program, ":i64"), 0);
  check_compiles(c.cuda_code);
}

TEST(scatter_add_in_a_graph_with_symbols) {
  ember_test::CudaPipeline c(kIndexAddBesideSymbols);
  CHECK_EQ(externs_named(c.program, "aten.index_add.default"), 0);
  CHECK_EQ(scatter_kernels(c.schedule), 1);
  for (const CudaKernelInfo& k : c.cuda_code.kernels) {
    const bool adds = c.cuda_code.source.find(k.name + "_partial(") != std::string::npos;
    CHECK_EQ(k.partial_grid, adds ? 1u : 0u);
    CHECK(k.grid_per_block > 0);  // grids counted per call
  }
  CHECK_EQ(count(c.cuda_code.source, "const ember_syms sym)"), 3);  // exp, the adds, their zeroing
  check_compiles(c.cuda_code);
}

// The verifier refuses a scatter-add into a buffer other than f32, and the schedule's
// verifier one that shares its kernel.
TEST(scatter_add_verifier_checks_its_buffer) {
  const std::string program = ember_test::after(kIndexAddBf16, {"lower_graph"}, ember::PipelineOptions::cuda());
  std::string bad = program;
  const size_t at = bad.find(": f32[30,16]{16,1} for [");
  CHECK(at != std::string::npos);
  bad.replace(at, 5, ": f16");
  bool threw = false;
  try {
    ember_test::after(bad, {"fuse"}, ember::PipelineOptions::cuda());
  } catch (const std::exception& e) {
    threw = std::string(e.what()).find("scatter-add") != std::string::npos;
  }
  CHECK(threw);
}
