// The CUDA printer: the shape each kernel gets, what it refuses, and (when NVRTC can be
// loaded: pip's nvidia-cuda-nvrtc dir in $EMBER_NVRTC_DIR, or $EMBER_NVRTC, or the loader's
// path) that the source compiles to a cubin for sm_90.
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "nvrtc_util.h"
#include "codegen/cuda/kernel.h"
#include "codegen/cuda/prelude.h"
#include "codegen/cuda/transpose.h"
#include "schedule/placement.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"

using ember_test::check_compiles;

using ember::CudaKernelInfo;

namespace {

const char* kSoftmax = R"(graph {
  %0 = input(0) : f32[64,3000]{3000,1}
  %1 = aten.amax.default(%0, [1], true) : f32[64,1]{1,1}
  %2 = aten.sub.Tensor(%0, %1, 1) : f32[64,3000]{3000,1}
  %3 = aten.exp.default(%2) : f32[64,3000]{3000,1}
  %4 = aten.sum.dim_IntList(%3, [1], true) : f32[64,1]{1,1}
  %5 = aten.div.Tensor(%3, %4) : f32[64,3000]{3000,1}
  return (%5)
}
)";

const char* kLayerNormBf16 = R"(graph {
  %0 = input(0) : bf16[32,64]{64,1}
  %1 = input(1) : bf16[64]{1}
  %2 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[32,64]{64,1}
  %3 = aten.var_mean.correction(%2, [1], 0, true) : (f32[32,1]{1,1}, f32[32,1]{1,1})
  %4 = aten.add.Tensor(%3, 1e-05, 1) : f32[32,1]{1,1}
  %5 = aten.rsqrt.default(%4) : f32[32,1]{1,1}
  %6 = aten.sub.Tensor(%2, %3.1, 1) : f32[32,64]{64,1}
  %7 = aten.mul.Tensor(%6, %5) : f32[32,64]{64,1}
  %8 = aten.mul.Tensor(%7, %1) : f32[32,64]{64,1}
  %9 = aten._to_copy.default(%8, "bf16", none, none, none, false, none) : bf16[32,64]{64,1}
  return (%9)
}
)";

const char* kPointwise = R"(graph {
  %0 = input(0) : f16[8,300]{300,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f16[8,300]{300,1}
  %2 = aten.relu.default(%1) : f16[8,300]{300,1}
  return (%2)
}
)";

const char* kArgmax = R"(graph {
  %0 = input(0) : f32[8,100]{100,1}
  %1 = aten.argmax.default(%0, 1, false) : i64[8]{1}
  return (%1)
}
)";

// The 3-channel image to channels-last: loads contiguous along W (and H), stores along C.
const char* kImageToChannelsLast = R"(graph {
  %0 = input(0) : bf16[2,3,64,64]{12288,4096,64,1}
  %1 = aten.clone.default(%0, "channels_last") : bf16[2,3,64,64]{12288,1,192,3}
  return (%1)
}
)";

// Activations the other way: channels-last [B, 64, H, W] to contiguous, with a relu.
const char* kChannelsLastToContiguous = R"(graph {
  %0 = input(0) : bf16[2,64,8,8]{4096,1,512,64}
  %1 = aten.relu.default(%0) : bf16[2,64,8,8]{4096,1,512,64}
  %2 = aten.clone.default(%1, "contiguous_format") : bf16[2,64,8,8]{4096,64,8,1}
  return (%2)
}
)";

const char* kTransposeOdd = R"(graph {
  %0 = input(0) : f32[1000,37]{37,1}
  %1 = aten.permute.default(%0, [1, 0]) : f32[37,1000]{1,37}
  %2 = aten.clone.default(%1, "contiguous_format") : f32[37,1000]{1000,1}
  return (%2)
}
)";

// Eager keeps x.t()'s layout for the result, so y (row-major) is the transposed read.
const char* kTransposeFused = R"(graph {
  %0 = input(0) : f32[64,48]{48,1}
  %1 = input(1) : f32[48,64]{64,1}
  %2 = aten.permute.default(%0, [1, 0]) : f32[48,64]{1,48}
  %3 = aten.mul.Tensor(%2, 2) : f32[48,64]{1,48}
  %4 = aten.add.Tensor(%3, %1, 1) : f32[48,64]{1,48}
  %5 = aten.relu.default(%4) : f32[48,64]{1,48}
  return (%5)
}
)";

// A column broadcast: its load is unit-stride along rows but does not vary along the
// store's contiguous dim, so there is nothing to transpose.
const char* kBroadcastColumn = R"(graph {
  %0 = input(0) : f32[64,48]{48,1}
  %1 = input(1) : f32[64,1]{1,1}
  %2 = aten.add.Tensor(%0, %1, 1) : f32[64,48]{48,1}
  return (%2)
}
)";

// A transpose too small for a tile of a block's worth of elements.
const char* kTransposeTiny = R"(graph {
  %0 = input(0) : f32[3,2]{2,1}
  %1 = aten.permute.default(%0, [1, 0]) : f32[2,3]{1,2}
  %2 = aten.clone.default(%1, "contiguous_format") : f32[2,3]{3,1}
  return (%2)
}
)";

// An image side of 2^31 elements (text only: nothing is allocated): 64-bit tile
// arithmetic, and more tiles than blocks, so blocks loop and wait before reusing shared
// memory.
const char* kTransposeHuge = R"(graph {
  %0 = input(0) : bf16[1,3,32768,65536]{6442450944,2147483648,65536,1}
  %1 = aten.clone.default(%0, "channels_last") : bf16[1,3,32768,65536]{6442450944,1,196608,3}
  return (%1)
}
)";
// A LayerNorm of rows of {C} elements of {T}, bf16 weight and bias, computed in f32.
const char* kLayerNormRows = R"(graph {
  %0 = input(0) : {T}[{R},{C}]{{C},1}
  %1 = input(1) : bf16[{C}]{1}
  %2 = input(2) : bf16[{C}]{1}
  %3 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[{R},{C}]{{C},1}
  %4 = aten.var_mean.correction(%3, [1], 0, true) : (f32[{R},1]{1,1}, f32[{R},1]{1,1})
  %5 = aten.add.Tensor(%4, 1e-05, 1) : f32[{R},1]{1,1}
  %6 = aten.rsqrt.default(%5) : f32[{R},1]{1,1}
  %7 = aten.sub.Tensor(%3, %4.1, 1) : f32[{R},{C}]{{C},1}
  %8 = aten.mul.Tensor(%7, %6) : f32[{R},{C}]{{C},1}
  %9 = aten.mul.Tensor(%8, %1) : f32[{R},{C}]{{C},1}
  %10 = aten.add.Tensor(%9, %2, 1) : f32[{R},{C}]{{C},1}
  %11 = aten._to_copy.default(%10, "{T}", none, none, none, false, none) : {T}[{R},{C}]{{C},1}
  return (%11)
}
)";

// Softmax over rows of {C} elements of {T}, computed in f32.
const char* kSoftmaxRows = R"(graph {
  %0 = input(0) : {T}[{R},{C}]{{C},1}
  %1 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[{R},{C}]{{C},1}
  %2 = aten.amax.default(%1, [1], true) : f32[{R},1]{1,1}
  %3 = aten.sub.Tensor(%1, %2, 1) : f32[{R},{C}]{{C},1}
  %4 = aten.exp.default(%3) : f32[{R},{C}]{{C},1}
  %5 = aten.sum.dim_IntList(%4, [1], true) : f32[{R},1]{1,1}
  %6 = aten.div.Tensor(%4, %5) : f32[{R},{C}]{{C},1}
  %7 = aten._to_copy.default(%6, "{T}", none, none, none, false, none) : {T}[{R},{C}]{{C},1}
  return (%7)
}
)";

// `text` with each {KEY} replaced.
std::string sized(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values)
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

// The CUDA pipeline that ships (pipeline.h), to CUDA source.
ember::CudaCode cuda_of(const std::string& text) { return ember_test::CudaPipeline(text).cuda_code; }

bool has(const ember::CudaCode& code, const std::string& text) { return code.source.find(text) != std::string::npos; }

}  // namespace

TEST(cuda_softmax_is_one_block_per_row) {
  ember::CudaCode code = cuda_of(kSoftmax);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowBlock);
  CHECK_EQ(code.kernels[0].grid, 64u);
  CHECK(code.source.find("ember_block_reduce(") != std::string::npos);
  check_compiles(code);
}

TEST(cuda_short_layer_norm_is_several_rows_a_warp_in_f32) {
  // 32 rows of 64 bf16: 8 chunks of 8, a row on 8 lanes, 4 rows a warp, 32 a block;
  // its reductions shuffle among those 8 lanes.
  ember::CudaCode code = cuda_of(kLayerNormBf16);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(code.kernels[0].grid, 1u);
  CHECK(code.source.find("blockIdx.x * 32 + (threadIdx.x >> 3)") != std::string::npos);
  CHECK(code.source.find("const int tid = threadIdx.x & 7;") != std::string::npos);
  CHECK(code.source.find("ember_warp_reduce<8>(") != std::string::npos);
  CHECK(code.source.find("ember_bf2f(") != std::string::npos);
  CHECK(code.source.find("ember_f2bf(") != std::string::npos);
  check_compiles(code);
}

TEST(cuda_pointwise_is_elementwise_with_32_bit_indices) {
  ember::CudaCode code = cuda_of(kPointwise);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Elementwise);
  CHECK(code.source.find("for (int t = ") != std::string::npos);
  // f16 buffers: 8 elements a thread, 256 threads a block, so 2,400 elements take 2 blocks;
  // a full tile unrolled, the rest element by element.
  CHECK_EQ(code.kernels[0].grid, 2u);
  CHECK(code.source.find("if (t + 1792 < 2400)") != std::string::npos);
  CHECK(code.source.find("for (int e = t; e < 2400; e += 256)") != std::string::npos);
  check_compiles(code);
}

// argmax along a row: a (value, index) pair per thread, updated in increasing index
// order, combined across the warp by ember_warp_arg; the index is stored as int64.
TEST(cuda_argmax_along_rows_carries_value_index_pairs) {
  ember::CudaCode code = cuda_of(kArgmax);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowWarp);
  CHECK(code.kernels[0].row_lanes == 0);  // no row tile: the element loop has the index j
  CHECK(has(code, "int64_t arg"));
  CHECK(has(code, " != ") && has(code, " = (int64_t)j; }"));
  CHECK(has(code, "ember_warp_arg<true>("));
  check_compiles(code);
}

// A long row on a block: the warps' pairs through 64 slots of shared memory.
TEST(cuda_argmin_of_long_rows_combines_pairs_across_warps) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[4,5000]{5000,1}
  %1 = aten.argmin.default(%0, 1, true) : i64[4,1]{1,1}
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowBlock);
  CHECK(has(code, "__shared__ uint64_t scratch[64];"));
  CHECK(has(code, "ember_block_arg<false>("));
  check_compiles(code);
}

// max.dim: the values and the indices of one row in one kernel, two accumulators.
TEST(cuda_max_dim_gives_values_and_indices_in_one_kernel) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : f32[16,300]{300,1}
  %1 = aten.max.dim(%0, 1, false) : (f32[16]{1}, i64[16]{1})
  return (%1.0, %1.1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(has(code, "ember_warp_reduce(") && has(code, "ember_warp_arg<true>("));
  check_compiles(code);
}

// argmax over dim 0: each output's column is its row (strided loads), one warp each.
TEST(cuda_argmax_over_the_outer_dim_reads_columns_as_rows) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : f32[100,8]{8,1}
  %1 = aten.argmax.default(%0, 0, false) : i64[8]{1}
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowWarp);
  CHECK(has(code, "ember_warp_arg<true>("));
  check_compiles(code);
}

// The decision, as data: which loop dims form the tile's sides and how long the tile is.
std::optional<ember::TransposePlan> transpose_plan_of(const char* text) {
  ember_test::CudaPipeline p(text);
  CHECK_EQ(p.schedule.kernels.size(), size_t{1});
  ember::Placement m = ember::place_buffers(p.program, p.schedule, ember::VectorResults::InMemory);
  return ember::plan_transpose(p.program, p.schedule.kernels[0], m.in_memory);
}

TEST(cuda_transpose_plan_takes_the_small_channel_dim_whole) {
  auto t = transpose_plan_of(kImageToChannelsLast);
  CHECK(t.has_value());
  if (!t) return;
  CHECK_EQ(t->store.extent.hint(), int64_t{3});      // C
  CHECK_EQ(t->load.extent.hint(), int64_t{64 * 64});  // H and W: one dim to both accesses
  CHECK_EQ(t->store.tile, int64_t{3});
  CHECK_EQ(t->load.tile, int64_t{672});               // 2,048 / 3 elements, whole warps
  CHECK_EQ(t->staged.size(), size_t{1});
  CHECK_EQ(t->tiles().hint(), int64_t{2 * 7});        // batch x ceil(4096 / 672)
  CHECK(!t->wide && !t->symbolic && t->tiles().is_static());
  CHECK_EQ(t->load_lanes, 8);   // runs of 672 pixels per channel
  CHECK_EQ(t->store_lanes, 8);  // the tile's 3 x 672 values: one run
}

TEST(cuda_transpose_plan_of_odd_sizes) {
  auto t = transpose_plan_of(kTransposeOdd);
  CHECK(t.has_value());
  if (!t) return;
  CHECK_EQ(t->load.extent.hint(), int64_t{37});
  CHECK_EQ(t->store.extent.hint(), int64_t{1000});
  CHECK_EQ(t->load.tile, int64_t{37});      // the short side whole
  CHECK_EQ(t->store.tile, int64_t{32});     // a line of f32
  CHECK_EQ(t->tiles().hint(), int64_t{32});  // ceil(1000 / 32), the last one partial
  CHECK_EQ(t->load_lanes, 4);            // rows of 37 are not whole words, but a tile's 32 rows are one run
  CHECK_EQ(t->store_lanes, 4);           // runs of 32 outputs, each starting at a multiple of 4
  // [333, 517] -> [517, 333]: runs of 517 (and 333) elements start at any multiple of
  // them, so no group of 4 is aligned: both phases stay scalar.
  auto odd = transpose_plan_of(R"(graph {
  %0 = input(0) : f32[333,517]{517,1}
  %1 = aten.permute.default(%0, [1, 0]) : f32[517,333]{1,517}
  %2 = aten.clone.default(%1, "contiguous_format") : f32[517,333]{333,1}
  return (%2)
}
)");
  CHECK(odd.has_value());
  if (!odd) return;
  CHECK_EQ(odd->load_lanes, 0);
  CHECK_EQ(odd->store_lanes, 0);
}

// Falcon's keys under dynamic=True: [s0, s1, 32] -> [s0, 32, s1]. The tile the hints give
// (the static side whole, a line along the symbolic one), the tile count per call, the
// symbolic side's bounds checked; 16-byte loads along the static side (rows of 32 floats),
// scalar stores along s1 (not known to be a multiple of 4).
TEST(cuda_transpose_over_symbolic_sizes) {
  const char* text = R"(graph(s0=2, s1=64) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s0,s1,32]{32*s1,32,1}
  %3 = aten.permute.default(%2, [0, 2, 1]) : f32[s0,32,s1]{32*s1,1,32}
  %4 = aten.clone.default(%3, "contiguous_format") : f32[s0,32,s1]{32*s1,s1,1}
  return (%4)
}
)";
  auto t = transpose_plan_of(text);
  CHECK(t.has_value());
  if (!t) return;
  CHECK(t->symbolic && t->wide);
  CHECK(t->load.extent.is_static() && !t->store.extent.is_static());
  CHECK_EQ(t->load.extent.hint(), int64_t{32});
  CHECK_EQ(t->load.tile, int64_t{32});
  CHECK_EQ(t->store.tile, int64_t{32});
  CHECK_EQ(ember::eval_dim(t->tiles(), {5, 100}), int64_t{5 * 4});  // batch x ceil(100 / 32)
  CHECK_EQ(t->load_lanes, 4);
  CHECK_EQ(t->store_lanes, 0);
  ember::CudaCode code = cuda_of(text);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Transpose);
  CHECK_EQ(code.kernels[0].grid_per_block, int64_t{1});
  CHECK_EQ(ember::eval_dim(code.kernels[0].grid_units, {5, 100}), int64_t{20});
  CHECK(has(code, "if (sg < (sym[1])) {"));
  CHECK(has(code, "const uint4 raw"));
  check_compiles(code);
}

TEST(cuda_transposing_kernels_get_the_transpose_shape) {
  for (const char* text : {kImageToChannelsLast, kChannelsLastToContiguous, kTransposeOdd, kTransposeFused}) {
    ember::CudaCode code = cuda_of(text);
    CHECK_EQ(code.kernels.size(), size_t{1});
    CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Transpose);
    CHECK_EQ(code.kernels[0].block, 256u);
    CHECK(code.source.find("__syncthreads();") != std::string::npos);
    check_compiles(code);
  }
  // The image: 3 x 672 tiles, rows of 3 floats (odd: no bank conflicts either way), a word
  // more every 8 for the vector phases' groups of 8 (TileLayout::spread).
  ember::CudaCode image = cuda_of(kImageToChannelsLast);
  CHECK_EQ(image.kernels[0].grid, 14u);
  CHECK(image.source.find("__shared__ float sh0[2269];") != std::string::npos);
  CHECK(image.source.find("sh0[(ql * 3 + qs) * 9 / 8]") != std::string::npos);
  // 16-byte loads along each channel's 672 pixels; 16-byte stores of the tile's one run
  // of 3 x 672 channels-last values; the scalar tile loop after them for unaligned pointers.
  CHECK(image.source.find("const uint4 raw0 = *(const uint4*)(b0 + ") != std::string::npos);
  CHECK(image.source.find("*(uint4*)(b1 + va1) = out1;") != std::string::npos);
  CHECK(image.source.find("& 15) == 0) {  /* vector accesses") != std::string::npos);
  // 64 x 64 tiles of bf16 values, rows padded to 65.
  CHECK(cuda_of(kChannelsLastToContiguous).source.find("[(ql * 65 + qs) * 9 / 8]") != std::string::npos);
  // Fused: only the transposed operand (y, buffer 1) goes through shared memory; the
  // relu and the scale are computed on the store side.
  ember::CudaCode fused = cuda_of(kTransposeFused);
  CHECK(fused.source.find("sh1[") != std::string::npos);
  CHECK(fused.source.find("sh0[") == std::string::npos);
  CHECK(fused.source.find("ember_max_f32") != std::string::npos);
}

// Six 3x3 convolution weights made channels-last in one kernel (ResNet-50's layer 3): four
// are staged (shared memory's budget), two read where they are stored. Its source once
// used a temporary placed outside every scope: CEmitter's level cache was keyed by the
// address of index expressions freed after printing, and a new one at the same address
// took the old one's scope level (0).
TEST(cuda_transpose_of_six_weights_compiles) {
  std::string text = "graph {\n";
  for (int i = 0; i < 6; ++i) text += "  %" + std::to_string(i) + " = input(" + std::to_string(i) + ") : bf16[256,256,3,3]{2304,9,3,1}\n";
  for (int i = 0; i < 6; ++i)
    text += "  %" + std::to_string(6 + i) + " = aten.clone.default(%" + std::to_string(i) +
            ", \"channels_last\") : bf16[256,256,3,3]{2304,1,768,256}\n";
  text += "  return (%6, %7, %8, %9, %10, %11)\n}\n";
  ember::CudaCode code = cuda_of(text.c_str());
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Transpose);
  CHECK(code.source.find("__shared__ float sh3[") != std::string::npos);
  CHECK(code.source.find("__shared__ float sh4[") == std::string::npos);
  check_compiles(code);
}

TEST(cuda_non_transposing_kernels_stay_elementwise) {
  for (const char* text : {kPointwise, kBroadcastColumn, kTransposeTiny}) {
    ember::CudaCode code = cuda_of(text);
    CHECK_EQ(code.kernels.size(), size_t{1});
    CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Elementwise);
    CHECK(code.source.find("__shared__") == std::string::npos);
  }
  CHECK(!transpose_plan_of(kBroadcastColumn).has_value());
  CHECK(!transpose_plan_of(kTransposeTiny).has_value());
}

TEST(cuda_transpose_of_2_31_elements_loops_with_64_bit_tiles) {
  ember::CudaCode code = cuda_of(kTransposeHuge);
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Transpose);
  CHECK_EQ(code.kernels[0].grid, uint32_t{1} << 20);
  // ceil(2^31 / 672) tiles of 3 x 672
  CHECK(code.source.find("for (int64_t tile = blockIdx.x; tile < 3195661; tile += gridDim.x)") != std::string::npos);
  CHECK(code.source.find("the next tile reuses shared memory") != std::string::npos);
  check_compiles(code);
}

// Two layers of the same shape: the second tanh runs the first one's function (their text
// is the same up to the buffers' ids); only the first is in the source NVRTC compiles.
TEST(cuda_kernels_that_differ_only_in_buffers_share_a_function) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[64,256]{256,1}
  %1 = input(1) : bf16[256,256]{256,1}
  %2 = aten.tanh.default(%0) : bf16[64,256]{256,1}
  %3 = aten.mm.default(%2, %1) : bf16[64,256]{256,1}
  %4 = aten.tanh.default(%3) : bf16[64,256]{256,1}
  %5 = aten.mm.default(%4, %1) : bf16[64,256]{256,1}
  %6 = aten.exp.default(%5) : bf16[64,256]{256,1}
  return (%6)
}
)");
  const auto& k = code.kernels;
  CHECK_EQ(k.size(), 3u);
  if (k.size() != 3) return;
  CHECK_EQ(k[0].function, k[0].name);
  CHECK_EQ(k[1].function, k[0].name);
  CHECK_EQ(k[2].function, k[2].name);
  CHECK(k[0].args != k[1].args);
  CHECK(!has(code, "void __launch_bounds__(" + std::to_string(k[1].block) + ") " + k[1].name + "("));
  CHECK_EQ(code.kernel_sources[1], "/* " + k[1].name + ": runs " + k[0].name + " */\n");
  check_compiles(code);
}

// BERT's, ViT's and GPT-2's LayerNorm: rows of 768 bf16 on one warp, 8 elements a chunk
// (one 16-byte access), 3 chunks a thread, the row loaded once into registers for the
// three stages (mean, variance, normalize), after a run-time alignment check.
TEST(cuda_layer_norm_768_bf16_keeps_its_row_in_registers) {
  ember::CudaCode code = cuda_of(sized(kLayerNormRows, {{"{R}", "4096"}, {"{C}", "768"}, {"{T}", "bf16"}}));
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(k.row_lanes, 8u);
  CHECK_EQ(k.row_slots, 3u);
  CHECK(k.row_cached == std::vector<int>{0});
  CHECK(has(code, "uint4 row0[3];"));
  CHECK(has(code, "row0[u] = *(const uint4*)(b0 + "));
  CHECK(has(code, ") & 15) == 0) {"));
  // The weight and bias are read once, in the last stage: a vector load there.
  CHECK(has(code, "const uint4 raw1 = *(const uint4*)(b1 + iv);"));
  CHECK(has(code, "*(uint4*)(b" + std::to_string(k.args.back()) + " + "));  // the output, by chunks
  // The misaligned fallback: the same tile (3 slots a stage, in each of the 3 stages),
  // its elements read one at a time, the row once per stage.
  CHECK(!has(code, "for (int j = tid;"));
  size_t slot_loops = 0;
  for (size_t at = code.source.find("for (int u = 0; u < 3; ++u) {"); at != std::string::npos;
       at = code.source.find("for (int u = 0; u < 3; ++u) {", at + 1))
    ++slot_loops;
  CHECK_EQ(slot_loops, size_t{6});
  CHECK(has(code, "ember_bf2f(b0["));
  check_compiles(code);
}

TEST(cuda_layer_norm_768_f32_takes_chunks_of_4) {
  ember::CudaCode code = cuda_of(sized(kLayerNormRows, {{"{R}", "64"}, {"{C}", "768"}, {"{T}", "f32"}}));
  const CudaKernelInfo& k = code.kernels[0];
  CHECK_EQ(k.row_lanes, 4u);  // a bf16 weight and an f32 row: 16 bytes of f32
  CHECK_EQ(k.row_slots, 6u);
  CHECK(k.row_cached == std::vector<int>{0});
  check_compiles(code);
}

// 3,000 f32 on a block of 256: 750 chunks of 4, 3 a thread, the last slot partly past
// the row's end.
TEST(cuda_softmax_3000_is_three_slots_with_a_ragged_last) {
  ember::CudaCode code = cuda_of(kSoftmax);
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowBlock);
  CHECK_EQ(k.block, 256u);
  CHECK_EQ(k.row_lanes, 4u);
  CHECK_EQ(k.row_slots, 3u);
  CHECK(has(code, "if (u < 2 || c < 750) {"));
  check_compiles(code);
}

// A row whose length is not a multiple of 2 is read element by element, still kept in
// registers (1,001 on a warp: 32 a thread), with no alignment check.
TEST(cuda_odd_rows_keep_scalars_in_registers) {
  ember::CudaCode code = cuda_of(sized(kSoftmaxRows, {{"{R}", "16"}, {"{C}", "1001"}, {"{T}", "f32"}}));
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(k.row_lanes, 1u);
  CHECK_EQ(k.row_slots, 32u);
  CHECK(has(code, "float row0[32];"));
  CHECK(!has(code, "row tile: vector accesses aligned"));
  check_compiles(code);
}

// Rows too long for registers: 65,536 f32 on 1,024 threads is 64 values a thread, more
// than kRowTileValues; the stages loop over 16-byte chunks, reading memory each time.
// (512 rows: enough to fill the GPU, so that split_long_reductions leaves them whole.)
TEST(cuda_huge_rows_stream_chunks_from_memory) {
  ember::CudaCode code = cuda_of(sized(kSoftmaxRows, {{"{R}", "512"}, {"{C}", "65536"}, {"{T}", "f32"}}));
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowBlock);
  CHECK_EQ(k.block, 1024u);
  CHECK_EQ(k.row_lanes, 4u);
  CHECK_EQ(k.row_slots, 0u);
  CHECK(k.row_cached.empty());
  CHECK(has(code, "for (int c = tid; c < 16384; c += 1024) {"));
  check_compiles(code);
}

// Few rows that long (4 of 65,536) would leave most SMs idle on a block each:
// split_long_reductions cuts the max and the sum into 16 chunks a row, 64 blocks of
// partials each, then a warp per row combines them; exp(x - max), which the sum and the
// division both read, and the division are elementwise kernels (FuseOptions::cuda: they
// do not join the 4-row kernels).
TEST(cuda_few_long_rows_reduce_in_chunks_across_blocks) {
  ember::CudaCode code = cuda_of(sized(kSoftmaxRows, {{"{R}", "4"}, {"{C}", "65536"}, {"{T}", "f32"}}));
  CHECK_EQ(code.kernels.size(), 6u);
  for (int k : {0, 3}) {
    CHECK(code.kernels[k].shape == CudaKernelInfo::Shape::RowBlock);
    CHECK_EQ(code.kernels[k].grid, 64u);
  }
  for (int k : {1, 4}) CHECK(code.kernels[k].shape == CudaKernelInfo::Shape::RowWarp);
  for (int k : {2, 5}) CHECK(code.kernels[k].shape == CudaKernelInfo::Shape::Elementwise);
  check_compiles(code);
}

// GPT-2's vocabulary softmax: 50,257 bf16 is neither a multiple of a chunk nor small
// enough for registers: the per-element loop, unchanged.
TEST(cuda_vocabulary_softmax_keeps_the_per_element_loop) {
  ember::CudaCode code = cuda_of(sized(kSoftmaxRows, {{"{R}", "2"}, {"{C}", "50257"}, {"{T}", "bf16"}}));
  const CudaKernelInfo& k = code.kernels[0];
  CHECK_EQ(k.row_lanes, 0u);
  CHECK(has(code, "for (int j = tid; j < 50257; j += 1024) {"));
  check_compiles(code);
}

namespace {

// Two channels-last activations, each normalized by its own inference BatchNorm, added
// and relu'd (the first block of a ResNet stage with a downsample branch).
std::string batch_norm_pair(int64_t n, int64_t c, int64_t h, const std::string& t) {
  const std::string C = std::to_string(c), act = t + "[" + std::to_string(n) + "," + C + "," + std::to_string(h) + "," +
                                             std::to_string(h) + "]{" + std::to_string(c * h * h) + ",1," +
                                             std::to_string(h * c) + "," + C + "}";
  const std::string vec = t + "[" + C + "]{1}", f32v = "f32[" + C + "]{1} internal";
  const std::string col = "f32[" + C + ",1,1]{1,1,1} internal", out = "f32" + act.substr(t.size()) + " internal";
  auto bn = [&](int x, int mean, int var, int w, int b, int at) {
    auto n_ = [&](int k) { return "%" + std::to_string(at + k); };
    return "  " + n_(0) + " = aten._to_copy.default(%" + std::to_string(mean) + ", \"f32\", none, none, none, false, none) : " + f32v + "\n" +
           "  " + n_(1) + " = aten._to_copy.default(%" + std::to_string(var) + ", \"f32\", none, none, none, false, none) : " + f32v + "\n" +
           "  " + n_(2) + " = aten.add.Tensor(" + n_(1) + ", 1e-05, 1) : " + f32v + "\n" +
           "  " + n_(3) + " = aten.sqrt.default(" + n_(2) + ") : " + f32v + "\n" +
           "  " + n_(4) + " = aten.reciprocal.default(" + n_(3) + ") : " + f32v + "\n" +
           "  " + n_(5) + " = aten.view.default(" + n_(0) + ", [" + C + ", 1, 1]) : " + col + "\n" +
           "  " + n_(6) + " = aten.view.default(" + n_(4) + ", [" + C + ", 1, 1]) : " + col + "\n" +
           "  " + n_(7) + " = aten.sub.Tensor(%" + std::to_string(x) + ", " + n_(5) + ", 1) : " + out + "\n" +
           "  " + n_(8) + " = aten.mul.Tensor(" + n_(7) + ", " + n_(6) + ") : " + out + "\n" +
           "  " + n_(9) + " = aten.view.default(%" + std::to_string(w) + ", [" + C + ", 1, 1]) : " + t + "[" + C + ",1,1]{1,1,1} internal\n" +
           "  " + n_(10) + " = aten.mul.Tensor(" + n_(8) + ", " + n_(9) + ") : " + out + "\n" +
           "  " + n_(11) + " = aten.view.default(%" + std::to_string(b) + ", [" + C + ", 1, 1]) : " + t + "[" + C + ",1,1]{1,1,1} internal\n" +
           "  " + n_(12) + " = aten.add.Tensor(" + n_(10) + ", " + n_(11) + ", 1) : " + out + "\n" +
           "  " + n_(13) + " = aten._to_copy.default(" + n_(12) + ", \"" + t + "\", none, none, none, false, none) : " + act + "\n";
  };
  std::string text = "graph {\n  %0 = input(0) : " + act + "\n  %1 = input(1) : " + act + "\n";
  for (int i = 2; i < 10; ++i) text += "  %" + std::to_string(i) + " = input(" + std::to_string(i) + ") : " + vec + "\n";
  text += bn(0, 2, 3, 4, 5, 10) + bn(1, 6, 7, 8, 9, 24);
  text += "  %38 = aten.add.Tensor(%23, %37, 1) : " + act + "\n  %39 = aten.relu.default(%38) : " + act + "\n  return (%39)\n}\n";
  return text;
}

// The text of the vector path's grid-stride loop (up to its end).
std::string vector_loop(const ember::CudaCode& code) {
  const size_t from = code.source.find("for (int g = ");
  return from == std::string::npos ? "" : code.source.substr(from, code.source.find("return;", from) - from);
}

}  // namespace

// Channels-last BatchNorm: C = 256 divides the grid-stride step, so each thread's channel
// is fixed; 1 / sqrt(var + eps) of each BatchNorm is computed once per lane before the
// loop (two values x 8 lanes), the grid shrunk to give threads several steps.
TEST(cuda_channels_last_batch_norm_hoists_its_per_channel_scale) {
  ember::CudaCode code = cuda_of(batch_norm_pair(16, 256, 28, "bf16"));
  const CudaKernelInfo* k = nullptr;
  for (const auto& kk : code.kernels)
    if (kk.hoisted_values > 0) k = &kk;
  CHECK(k != nullptr);
  if (!k) return;
  CHECK_EQ(k->hoisted_values, 2u);
  CHECK_EQ(k->hoisted_words, 24u);  // all 6 bf16 [C] words the loop reads
  CHECK_EQ(k->grid, 1024u);         // 1,568 blocks' worth of elements: kHoistBlocks
  CHECK(has(code, "float h0[8];"));
  // 16 registers of values and 24 of words: declared at 4 blocks an SM (kHoistMinBlocksAbove).
  CHECK(has(code, "__launch_bounds__(256, 4) " + k->name + "("));
  CHECK(has(code, "const int64_t hv = (int64_t)(g0 * 8 % 256);"));
  CHECK(has(code, ") % 256 == 0) {  /* vector path"));
  const std::string loop = vector_loop(code);
  CHECK(!loop.empty());
  CHECK(code.source.find("sqrtf(") < code.source.find("for (int g = "));
  CHECK(loop.find("sqrtf(") == std::string::npos);
  CHECK(loop.find(" * h0[u];") != std::string::npos && loop.find(" * h1[u];") != std::string::npos);
  check_compiles(code);
}

TEST(cuda_batch_norm_f32_hoists_with_4_lanes) {
  ember::CudaCode code = cuda_of(batch_norm_pair(16, 256, 28, "f32"));
  bool found = false;
  for (const auto& k : code.kernels)
    if (k.hoisted_values > 0) {
      found = true;
      CHECK_EQ(k.hoisted_values, 2u);
      CHECK_EQ(k.hoisted_words, 24u);  // every [C] word the loop reads: 6 x 4 floats
    }
  CHECK(found);
  CHECK(has(code, "float h1[4];"));
  CHECK(!has(code, "__launch_bounds__(256, 4)"));  // 8 + 24 registers: not above 32
  CHECK(vector_loop(code).find("sqrtf(") == std::string::npos);
  check_compiles(code);
}

// C = 200 does not divide 256 x 8: the grid is rounded up to a multiple of 25 blocks.
// C = 1,032 would need a multiple of 129 blocks, more than an eighth of the grid: no
// hoisting. Nor where the grid gives each thread one step (a small tensor).
TEST(cuda_hoisting_needs_a_step_that_keeps_the_channel) {
  auto hoisting = [](const ember::CudaCode& code) {
    for (const auto& k : code.kernels)
      if (k.hoisted_values > 0) return static_cast<int64_t>(k.grid);
    return int64_t{0};
  };
  ember::CudaCode c200 = cuda_of(batch_norm_pair(16, 200, 28, "bf16"));
  CHECK_EQ(hoisting(c200), 1025);
  CHECK(has(c200, ") % 200 == 0) {  /* vector path"));
  check_compiles(c200);
  ember::CudaCode c1032 = cuda_of(batch_norm_pair(16, 1032, 14, "bf16"));
  CHECK_EQ(hoisting(c1032), 0);
  CHECK(vector_loop(c1032).find("sqrtf(") != std::string::npos);
  ember::CudaCode small = cuda_of(batch_norm_pair(2, 256, 28, "bf16"));
  CHECK_EQ(hoisting(small), 0);
  CHECK(!has(small, "h0["));
}

// ResNet's stem pool, channels-last: nine window loads of one buffer, each its own vector
// word (4 bf16 lanes: the i64 indices make the lanes 4); the windows that may leave the
// image (padding, only up and left here) read under their guard, clamped to whole words.
TEST(cuda_max_pool_reads_each_window_position_as_a_vector_word) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[2,64,8,8]{4096,1,512,64}
  %1 = aten.max_pool2d_with_indices.default(%0, [3, 3], [2, 2], [1, 1], [1, 1], false) : (bf16[2,64,4,4]{1024,1,256,64}, i64[2,64,4,4]{1024,1,256,64})
  return (%1, %1.1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(has(code, "const uint2 raw0 = *(const uint2*)(b0 + ember_clamp_index("));
  CHECK(has(code, ", 8188LL));"));  // 8,192 elements, the last word at 8,188
  CHECK(has(code, "const uint2 raw0_8 = *(const uint2*)(b0 + t"));
  const std::string loop = vector_loop(code);
  CHECK(loop.find("b0[") == std::string::npos);  // no scalar read of the input is left
  check_compiles(code);
}

// The same pool in inference (the indices unused): a window row or column outside the
// image is clamped into it (a repeat of a value of the same window leaves the max as it
// is), so the nine words are read unguarded and no lane selects -inf.
TEST(cuda_max_pool_values_clamp_their_window_positions) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[2,64,8,8]{4096,1,512,64}
  %1 = aten.max_pool2d_with_indices.default(%0, [3, 3], [2, 2], [1, 1], [1, 1], false) : (bf16[2,64,4,4]{1024,1,256,64}, i64[2,64,4,4]{1024,1,256,64})
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  // 8 bf16 lanes: no i64 indices are stored.
  CHECK(has(code, "const uint4 raw0_8 = *(const uint4*)(b0 + t"));
  CHECK(has(code, " > 0LL ? "));  // the clamp of a window row (and column) at the top (left)
  const std::string loop = vector_loop(code);
  CHECK(loop.find("b0[") == std::string::npos);
  CHECK(loop.find("ember_clamp_index(") == std::string::npos);
  CHECK(loop.find("INFINITY") == std::string::npos);
  check_compiles(code);
}

// A graph with symbols: every kernel in the general form of its shape, sizes read from
// the `sym` parameter, 64-bit indices, and grids as sizes the launch evaluates.
TEST(cuda_symbolic_kernels_read_sizes_from_their_symbol_parameter) {
  ember::CudaCode code = cuda_of(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : bf16[s0,s1]{s1,1}
  %3 = input(3) : bf16[s1]{1}
  %4 = aten.mul.Tensor(%2, %3) : bf16[s0,s1]{s1,1}
  %5 = aten.relu.default(%4) : bf16[s0,s1]{s1,1}
  return (%5)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::Elementwise);
  // No vector path or hoisting (their plans need static sizes); 8 bf16 elements a thread.
  CHECK(k.hoisted_values == 0 && k.grid_multiple == 0);
  CHECK_EQ(k.grid_per_block, int64_t{2048});
  CHECK_EQ(ember::eval_dim(k.grid_units, {1000, 768}), int64_t{768000});
  CHECK(has(code, ", const ember_syms sym) {"));
  CHECK(has(code, "const int64_t t0 = sym[0] * sym[1];"));  // the elements, at the top
  CHECK(has(code, "t < t0; t += (int64_t)gridDim.x * 2048)"));
  CHECK(!has(code, "for (int t") && !has(code, "for (int e"));  // 64-bit element indices
  CHECK(!has(code, "uint4"));      // no vector word
  check_compiles(code);
}

// Such a kernel's grid at a call: ceil(units / per block) at the call's symbol values;
// its row loops run to the symbolic length.
TEST(cuda_symbolic_rows_loop_to_the_call_length) {
  ember::CudaCode code = cuda_of(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : bf16[s0,s1]{s1,1}
  %3 = aten.add.Tensor(%2, 1.0, 1) : bf16[s0,s1]{s1,1}
  %4 = aten._softmax.default(%3, -1, false) : bf16[s0,s1]{s1,1}
  return (%4)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowWarp);  // at the hint (4 wide)
  CHECK(k.row_lanes == 0 && k.partial_grid == 0);
  CHECK_EQ(k.grid_per_block, int64_t{8});
  CHECK_EQ(ember::eval_dim(k.grid_units, {1000, 7}), int64_t{1000});  // rows: s0
  CHECK_EQ(k.grid, 1u);  // at the hints: 3 rows, one block
  CHECK(has(code, "if (x >= sym[0]) return;"));
  CHECK(has(code, "for (int64_t j = tid; j < sym[1]; j += 32)"));
  CHECK(has(code, "double acc"));  // a row of any length: the sum in double
  check_compiles(code);
}

// A symbolic row count over a static width (a dynamic batch or sequence): the pointwise
// kernel keeps its 16-byte words and the LayerNorm its row tile.
TEST(cuda_symbolic_rows_of_a_static_width_keep_vector_accesses) {
  ember::CudaCode code = cuda_of(R"(graph(s0=64) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : bf16[s0,768]{768,1}
  %2 = input(2) : bf16[768]{1}
  %3 = aten.mul.Tensor(%1, %2) : bf16[s0,768]{768,1}
  %4 = aten._to_copy.default(%3, "f32", none, none, none, false, none) : f32[s0,768]{768,1}
  %5 = aten.var_mean.correction(%4, [1], 0, true) : (f32[s0,1]{1,1}, f32[s0,1]{1,1})
  %6 = aten.add.Tensor(%5, 1e-05, 1) : f32[s0,1]{1,1}
  %7 = aten.rsqrt.default(%6) : f32[s0,1]{1,1}
  %8 = aten.sub.Tensor(%4, %5.1, 1) : f32[s0,768]{768,1}
  %9 = aten.mul.Tensor(%8, %7) : f32[s0,768]{768,1}
  %10 = aten._to_copy.default(%9, "bf16", none, none, none, false, none) : bf16[s0,768]{768,1}
  %11 = aten.relu.default(%1) : bf16[s0,768]{768,1}
  return (%10, %11, %3)
}
)");
  bool row_tile = false;
  for (const auto& k : code.kernels) {
    CHECK(k.grid_per_block > 0);
    row_tile |= k.shape != CudaKernelInfo::Shape::Elementwise && k.row_lanes == 8;
  }
  CHECK(row_tile);
  CHECK(has(code, "const uint4 raw0 = *(const uint4*)(b0 + "));  // a row's words
  CHECK(has(code, "const uint4 raw1 = *(const uint4*)(b1 + iv)"));  // the weight's
  CHECK(has(code, "if (x >= sym[0]) return;"));
  check_compiles(code);
}

// A load under a Where branch (a pad) proves no range in a graph with symbols: it stays
// scalar (clamped), while the store is a word.
TEST(cuda_symbolic_guarded_loads_stay_scalar) {
  ember::CudaCode code = cuda_of(R"(graph(s0=64) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : bf16[s0,760]{760,1}
  %2 = aten.constant_pad_nd.default(%1, [0, 8], 0.0) : bf16[s0,768]{768,1}
  return (%2)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(!has(code, "const uint4 raw0"));  // the load: scalar, clamped
  CHECK(has(code, "ember_clamp_index("));
  CHECK(has(code, "*(uint4*)(b1 + "));     // the store: a word
  check_compiles(code);
}

// max-autotune's candidates (generate_cuda_variants, runtime/cuda_autotune.cpp): each
// kernel printed again with another launch, under its own name, compiling on its own
// after the prelude.
namespace {

std::vector<ember::CudaKernelVariant> variants_of(const std::string& text, int kernel = 0) {
  ember_test::CudaPipeline p(text);
  return ember::generate_cuda_variants(p.program, p.schedule, p.cuda_schedule, kernel);
}

void check_variants_compile(const std::vector<ember::CudaKernelVariant>& vs) {
  for (const auto& v : vs) {
    ember::CudaCode code;
    code.source = ember::cuda_prelude() + "\n" + v.source;
    check_compiles(code);
  }
}

}  // namespace

// 2,400 f16 elements, 8 a thread: block 128 takes 3 blocks; 512 and 1,024 one, with the
// unrolled tile and the tail stepping by their own block.
TEST(cuda_elementwise_variants_change_the_block) {
  auto vs = variants_of(kPointwise);
  CHECK_EQ(vs.size(), size_t{3});
  if (vs.size() != 3) return;
  CHECK_EQ(vs[0].choice_text, std::string("block 128"));
  CHECK_EQ(vs[1].choice_text, std::string("block 512"));
  CHECK_EQ(vs[2].choice_text, std::string("block 1024"));
  CHECK_EQ(vs[0].info.block, 128u);
  CHECK_EQ(vs[0].info.grid, 3u);
  CHECK_EQ(vs[1].info.grid, 1u);
  CHECK(vs[1].source.find("__launch_bounds__(512) " + vs[1].info.name + "(") != std::string::npos);
  CHECK(vs[1].source.find("for (int e = t; e < 2400; e += 512)") != std::string::npos);
  CHECK(vs[0].info.name != vs[1].info.name && vs[0].info.function == vs[0].info.name);
  CHECK(vs[0].info.writes.size() == 1 && vs[0].info.writes[0] == vs[0].info.args.back());
  check_variants_compile(vs);
}

// 32 LayerNorm rows of 64, 4 a warp: 4 or 16 warps a block, or a block per row.
TEST(cuda_warp_row_variants_change_warps_per_block_or_take_a_block_per_row) {
  auto vs = variants_of(kLayerNormBf16);
  CHECK_EQ(vs.size(), size_t{3});
  if (vs.size() != 3) return;
  CHECK_EQ(vs[0].choice_text, std::string("4 warps a block"));
  CHECK(vs[0].info.shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(vs[0].info.grid, 2u);
  CHECK_EQ(vs[0].info.block, 128u);
  CHECK(vs[0].source.find("blockIdx.x * 16 + (threadIdx.x >> 3)") != std::string::npos);
  CHECK_EQ(vs[1].info.grid, 1u);
  CHECK_EQ(vs[2].choice_text, std::string("a block per row"));
  CHECK(vs[2].info.shape == CudaKernelInfo::Shape::RowBlock);
  CHECK_EQ(vs[2].info.grid, 32u);
  check_variants_compile(vs);
}

// A softmax row of 3,000 floats on a block: half and twice the threads.
TEST(cuda_block_row_variants_change_threads_per_row) {
  ember::CudaCode code = cuda_of(kSoftmax);
  auto vs = variants_of(kSoftmax);
  CHECK(!vs.empty() && vs.size() <= 2);
  for (const auto& v : vs) {
    CHECK(v.info.shape == CudaKernelInfo::Shape::RowBlock);
    CHECK(v.info.block != code.kernels[0].block);
    CHECK_EQ(v.info.grid, 64u);
    CHECK(v.choice_text.rfind("threads per row ", 0) == 0);
  }
  check_variants_compile(vs);
}

// A hoisted BatchNorm pair declares as many threads an SM at block 512 as at 256 (2 x 512).
TEST(cuda_hoisted_variants_keep_the_threads_an_sm_declares) {
  const std::string text = batch_norm_pair(16, 256, 28, "bf16");
  ember::CudaCode code = cuda_of(text);
  int hoisted = -1;
  for (size_t k = 0; k < code.kernels.size(); ++k)
    if (code.kernels[k].hoisted_values > 0) hoisted = static_cast<int>(k);
  CHECK(hoisted >= 0);
  if (hoisted < 0) return;
  ember_test::CudaPipeline p(text);
  bool found = false;
  for (const auto& v : ember::generate_cuda_variants(p.program, p.schedule, p.cuda_schedule, hoisted))
    if (v.info.block == 512) {
      found = true;
      CHECK(v.info.hoisted_values > 0);
      CHECK(v.source.find("__launch_bounds__(512, 2) " + v.info.name + "(") != std::string::npos);
      check_variants_compile({v});
    }
  CHECK(found);
}

// A residual sum over rows of 2,048 f32 (a block of 128 a row, 4 slots), LayerNorm'd and
// scaled by x again: x is read by two stages, so its row is cached, and the sum, read by
// the later stages only, is kept in registers only (schedule_cuda). Half the threads
// would take 8 slots, whose cached x leaves no room to keep the sum: that launch cannot
// run and is no variant (it would read the sum from a buffer no memory holds); twice
// the threads keep it.
TEST(cuda_variants_keep_the_values_the_rules_keep_in_registers_only) {
  const std::string x = "buf0[((o0 * 2048) + i0)]", v = "buf2[((o0 * 2048) + i0)]", mean = "div(buf3[o0], 2048.0)";
  const std::string state =
      "program(vars=8)\n"
      "buf0 = input(0) : f32[64,2048]{2048,1}\n"
      "buf1 = input(1) : f32[64,2048]{2048,1}\n"
      "buf2 : f32[64,2048]{2048,1} for [v0, v1] = (buf0[((v0 * 2048) + v1)] + buf1[((v0 * 2048) + v1)])  from %2\n"
      "buf3 : f32[64,1]{1,1} for [v2, _] = sum f32 over [2048] for [v3] of buf2[((v2 * 2048) + v3)]  from %3\n"
      "buf4 : f32[64,1]{1,1} for [v4, _] = sum f32 over [2048] for [v5] of (sub(buf2[((v4 * 2048) + v5)], "
      "div(buf3[v4], 2048.0)) * sub(buf2[((v4 * 2048) + v5)], div(buf3[v4], 2048.0)))  from %3\n"
      "buf5 : f32[64,2048]{2048,1} for [v6, v7] = ((sub(buf2[((v6 * 2048) + v7)], div(buf3[v6], 2048.0)) * "
      "rsqrt((div(buf4[v6], 2048.0) + 1e-05))) * buf0[((v6 * 2048) + v7)])  from %4\n"
      "return buf5\n"
      "schedule\n"
      "kernel ember_k0 outer=[64]\n"
      "  stage 0 inner=[2048]: buf2 buf3(sum)\n"
      "    " + v + " = (" + x + " + buf1[((o0 * 2048) + i0)])\n"
      "    reduce buf3[o0] = " + v + "\n"
      "  stage 1 inner=[2048]: buf4(sum)\n"
      "    reduce buf4[o0] = (sub(" + v + ", " + mean + ") * sub(" + v + ", " + mean + "))\n"
      "  stage 2 inner=[2048]: buf5\n"
      "    buf5[((o0 * 2048) + i0)] = ((sub(" + v + ", " + mean + ") * rsqrt((div(buf4[o0], 2048.0) + 1e-05))) * " + x + ")\n";
  ember::Program p = ember::parse_program(state.substr(0, state.find("\nschedule\n") + 1));
  ember::Schedule s = ember::parse_schedule(ember_test::schedule_part(state), p);
  ember::CudaSchedule cs = ember::schedule_cuda(p, s);
  const ember::RowTile& tile = cs.kernels[0].row_tile;
  CHECK_EQ(cs.kernels[0].info.block, 128u);
  CHECK(tile.cached == std::set<int>{0} && tile.unstored == std::set<int>{2});
  CHECK(!cs.placement.in_memory[2]);
  auto vs = ember::generate_cuda_variants(p, s, cs, 0);
  CHECK_EQ(vs.size(), size_t{1});
  if (vs.size() != 1) return;
  CHECK_EQ(vs[0].choice_text, std::string("threads per row x2"));
  CHECK(vs[0].source.find("float kept2[") != std::string::npos);
  CHECK(vs[0].source.find(" b2") == std::string::npos);
  check_variants_compile(vs);
}

// Transposes keep their tiles, and graphs with symbols their launches: no variants.
TEST(cuda_transposes_and_symbolic_graphs_have_no_variants) {
  CHECK(variants_of(kImageToChannelsLast).empty());
  CHECK(variants_of(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : bf16[s0,s1]{s1,1}
  %3 = aten.relu.default(%2) : bf16[s0,s1]{s1,1}
  return (%3)
}
)").empty());
}

// A channels-last global average pool of a few images: the column split's partial
// launch takes each image on several blocks (the vector geometry: 32 groups of 8 threads,
// 8 channels a thread); the kernel combines each channel's partials of its image in
// chunk order.
TEST(cuda_channels_last_mean_of_few_images_splits_across_blocks) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[8,64,32,32]{65536,1,2048,64}
  %1 = aten.mean.dim(%0, [2, 3], true, none) : bf16[8,64,1,1]{64,1,64,64}
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowBlock);
  CHECK_EQ(k.grid, 8u);
  CHECK_EQ(k.partial_block, 256u);  // 32 groups of 8 threads
  CHECK_EQ(k.partial_grid, 8u * 4u);  // 1,024 pixels an image: 4 chunks of 256, a thread 8 pixels of each
  CHECK(has(code, "const int64_t s = (int64_t)(blockIdx.x % 4u / 1u);"));
  CHECK(has(code, "[((int64_t)x * 4 + s) * 64 + tile + c] = "));  // the partial launch's store
  CHECK(has(code, "[((int64_t)x * 4 + s) * 64 + i0]"));  // the kernel's combine
  check_compiles(code);
}

namespace {

// The text of the partial launch's function.
std::string partial_source(const ember::CudaCode& code) {
  const size_t at = code.source.find("_partial(");
  if (at == std::string::npos) return "";
  return code.source.substr(at, code.source.find("\n}\n", at) - at);
}

}  // namespace

// DeepLabV3's ASPP pool shape (2,048 channels of 64 x 64 pixels on 8 images) in f64, which
// no vector load takes: the scalar geometry gives each thread 8 columns 256 apart, all
// loaded in one iteration of the rows (8 times the loads in flight of one column a
// thread), at the same grid and chunks.
TEST(cuda_wide_channels_last_pool_takes_eight_columns_a_thread) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : f64[8,2048,64,64]{8388608,1,131072,2048}
  %1 = aten.mean.dim(%0, [2, 3], true, none) : f64[8,2048,1,1]{2048,1,2048,2048}
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK_EQ(k.partial_block, 256u);
  CHECK_EQ(k.partial_grid, 8u * 32u);  // 32 chunks of 128 pixels an image
  const std::string partial = partial_source(code);
  CHECK(partial.find("for (int k = lane; k < 2048; k += 2048) {") != std::string::npos);
  CHECK(partial.find("= (int64_t)(k) + 1792;") != std::string::npos);  // the eighth column
  CHECK(partial.find("#pragma unroll 2") != std::string::npos);
  size_t stores = 0;
  for (size_t at = partial.find("[((int64_t)x * 32 + s) * 2048 + col"); at != std::string::npos;
       at = partial.find("[((int64_t)x * 32 + s) * 2048 + col", at + 1))
    ++stores;
  CHECK_EQ(stores, size_t{8});
  check_compiles(code);
}

// The same pool in bf16: the vector geometry, 8 channels a thread in one 16-byte load, 32
// tiles of 64 channels, 3 chunks of 1,366 pixels an image.
TEST(cuda_wide_channels_last_bf16_pool_reads_sixteen_bytes_a_row) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[8,2048,64,64]{8388608,1,131072,2048}
  %1 = aten.mean.dim(%0, [2, 3], true, none) : bf16[8,2048,1,1]{2048,1,2048,2048}
  return (%1)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK_EQ(k.partial_block, 256u);
  CHECK_EQ(k.partial_grid, 8u * 3u * 32u);
  CHECK(partial_source(code).find("= *(const uint4*)(b0 + ") != std::string::npos);
  check_compiles(code);
}

// ResNet's last BatchNorm before its pool: what depends on the channel alone (1 / sqrt(var
// + eps)) is computed for each of a thread's columns before the loop over the pixels, not
// once a pixel.
TEST(cuda_pool_columns_compute_per_channel_values_before_the_rows) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[64,2048,7,7]{100352,1,14336,2048}
  %1 = input(1) : f32[2048,1,1]{1,1,1}
  %2 = aten.add.Tensor(%1, 1e-05, 1) : f32[2048,1,1]{1,1,1}
  %3 = aten.sqrt.default(%2) : f32[2048,1,1]{1,1,1}
  %4 = aten.reciprocal.default(%3) : f32[2048,1,1]{1,1,1}
  %5 = aten.mul.Tensor(%0, %4) : f32[64,2048,7,7]{100352,1,14336,2048}
  %6 = aten.relu.default(%5) : f32[64,2048,7,7]{100352,1,14336,2048}
  %7 = aten.mean.dim(%6, [2, 3], true, none) : f32[64,2048,1,1]{2048,1,2048,2048}
  return (%7)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  const std::string partial = partial_source(code);
  const size_t rows = partial.find("for (int r = ");
  CHECK(rows != std::string::npos);
  size_t sqrts = 0, last = 0;
  for (size_t at = partial.find("sqrtf("); at != std::string::npos; at = partial.find("sqrtf(", at + 1)) ++sqrts, last = at;
  CHECK_EQ(sqrts, size_t{8});
  CHECK(last < rows);
  check_compiles(code);
}

// A cat of strided slices (shift_block's patch merging): each element loads only the part
// its channel selects, the load inside the select, where every part's clamped load into
// another part's memory once ran for each element (a 4-way cat read 4x its input).
TEST(cuda_cat_of_strided_slices_loads_only_the_taken_part) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[8,64,32,32]{65536,1024,32,1}
  %1 = aten.slice.Tensor(%0, 3, 0, 9223372036854775807, 2) : bf16[8,64,32,16]{65536,1024,32,2}
  %2 = aten.slice.Tensor(%0, 3, 1, 9223372036854775807, 2) : bf16[8,64,32,16]{65536,1024,32,2}
  %3 = aten.cat.default([%1, %2], 1) : bf16[8,128,32,16]{65536,512,16,1}
  return (%3)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(has(code, " ? ember_bf2f(b0[ember_clamp_index("));
  CHECK(has(code, " : ember_bf2f(b0[ember_clamp_index("));
  CHECK(!has(code, "= ember_bf2f(b0["));  // no load of its own, before the select
  check_compiles(code);
}

TEST(cuda_batch_norm_statistics_of_a_channels_last_activation_run_as_rows_of_columns) {
  // A training BatchNorm's mean and variance over 32 x 56 x 56 channels-last bf16 pixels
  // of 64 channels: each reduction's partials over 1,792 chunks of 56 pixels, a block of
  // 64 threads (a thread a channel) each (lower/split_long_reductions.h), then the
  // column reduction of the partials, split across blocks (column_split.h).
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : bf16[32,64,56,56]{200704,1,3584,64}
  %1 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[32,64,56,56]{200704,1,3584,64}
  %2 = aten.var_mean.correction(%1, [0, 2, 3], 0, true) : (f32[1,64,1,1]{64,1,1,1}, f32[1,64,1,1]{64,1,1,1})
  return (%2, %2.1)
}
)");
  std::string summary;
  for (const auto& k : code.kernels)
    summary += k.name + " grid " + std::to_string(k.grid) + " block " + std::to_string(k.block) + " partial grid " +
               std::to_string(k.partial_grid) + "\n";
  CHECK_EQ(summary,
           "ember_red_var_mean_0 grid 1792 block 64 partial grid 0\n"  // the mean's partials
           "ember_red_var_mean_1 grid 1 block 1024 partial grid 14\n"  // the mean: 7 chunks x 2 tiles of 32 f32 columns
           "ember_red_var_mean_2 grid 1792 block 64 partial grid 0\n"  // the deviations' partials
           "ember_red_var_mean_3 grid 1 block 1024 partial grid 14\n");
  check_compiles(code);
}

namespace {

// The partial launch of a column sum [C] <- sum over rows of `input` (graph text of its
// type, e.g. "bf16[16384,64]{64,1}"), sliced to columns [lo, hi) first when hi > 0.
ember::CudaCode column_sum_of(const std::string& input, const std::string& out, int64_t lo = 0, int64_t hi = 0,
                              const std::string& sliced = "") {
  std::string text = "graph {\n  %0 = input(0) : " + input + "\n";
  std::string src = "%0";
  if (hi > 0) {
    text += "  %1 = aten.slice.Tensor(%0, 1, " + std::to_string(lo) + ", " + std::to_string(hi) + ", 1) : " + sliced + "\n";
    src = "%1";
  }
  const std::string sum = hi > 0 ? "%2" : "%1";
  text += "  " + sum + " = aten.sum.dim_IntList(" + src + ", [0], false, none) : " + out + "\n  return (" + sum + ")\n}\n";
  return cuda_of(text);
}

}  // namespace

// A column sum of bf16 rows 64 wide (a BatchNorm's statistics over channels-last
// activations): the partial launch reads each row's 8 consecutive columns of a thread in
// one 16-byte load (8 threads a row, a warp 4 consecutive rows: 512 contiguous bytes), 32
// groups of rows a block added through shared memory in group order, and scalar loads of
// the same columns when the input is not aligned to 16 bytes at run time.
TEST(cuda_column_split_reads_eight_bf16_columns_a_thread_in_one_load) {
  ember::CudaCode code = column_sum_of("bf16[16384,64]{64,1}", "bf16[64]{1}");
  CHECK_EQ(code.kernels.size(), size_t{1});
  if (code.kernels.size() != 1) return;
  const CudaKernelInfo& k = code.kernels[0];
  CHECK_EQ(k.partial_block, 256u);  // 32 groups of 8 threads
  CHECK_EQ(k.partial_grid, 64u);    // 16,384 rows: 64 chunks of 256, a thread 8 of each
  const std::string partial = partial_source(code);
  CHECK(partial.find("= *(const uint4*)(b0 + ") != std::string::npos);
  CHECK(partial.find("const bool aligned = ((uintptr_t)b0 & 15) == 0;") != std::string::npos);
  CHECK(partial.find("for (int r = s * 256 + g; r < hi; r += 32) {") != std::string::npos);
  CHECK(partial.find("__shared__ double groups") != std::string::npos);  // 16,384 rows: a long float sum's type
  CHECK(partial.find("for (int q = 0; q < 32; ++q) {") != std::string::npos);
  CHECK_EQ(ember_test::count(partial, "*(const uint4*)("), 1);  // the vector walk's; the scalar walk loads b0[...]
  check_compiles(code);
}

// fp32 columns, 4 a thread (16 bytes); a bf16 operand beside them reads its 4 in 8 bytes.
TEST(cuda_column_split_reads_four_f32_columns_a_thread) {
  ember::CudaCode code = cuda_of(R"(graph {
  %0 = input(0) : f32[16384,96]{96,1}
  %1 = input(1) : bf16[16384,96]{96,1}
  %2 = aten.mul.Tensor(%0, %1) : f32[16384,96]{96,1}
  %3 = aten.sum.dim_IntList(%2, [0], false, none) : f32[96]{1}
  return (%3)
}
)");
  CHECK_EQ(code.kernels.size(), size_t{1});
  if (code.kernels.size() != 1) return;
  const CudaKernelInfo& k = code.kernels[0];
  CHECK_EQ(k.partial_block, 256u);  // 32 groups of 8 threads, 4 columns each
  CHECK_EQ(k.partial_grid, 64u * 3u);  // 64 chunks of 256 rows, 3 tiles of 32 columns
  const std::string partial = partial_source(code);
  CHECK(partial.find("= *(const uint4*)(b0 + ") != std::string::npos);
  CHECK(partial.find("= *(const uint2*)(b1 + ") != std::string::npos);
  CHECK(partial.find("((uintptr_t)b0 & 15) == 0 && ((uintptr_t)b1 & 7) == 0") != std::string::npos);
  check_compiles(code);
}

// Where a thread's columns cannot be one access the partial launch keeps its scalar
// geometry: a width that is no multiple of 8 bf16 lanes, and columns that start one
// element past a 16-byte boundary (a slice [:, 1:65] of rows 72 wide). A slice at a
// multiple of 8 ([:, 8:72]) keeps the vector loads.
TEST(cuda_column_split_keeps_scalar_loads_where_columns_are_not_words) {
  for (const ember::CudaCode& code : {column_sum_of("bf16[16384,100]{100,1}", "bf16[100]{1}"),
                                      column_sum_of("bf16[16384,72]{72,1}", "bf16[64]{1}", 1, 65, "bf16[16384,64]{72,1}")}) {
    CHECK_EQ(code.kernels.size(), size_t{1});
    if (code.kernels.size() != 1) continue;
    CHECK(code.kernels[0].partial_grid > 0);
    const std::string partial = partial_source(code);
    CHECK(!partial.empty() && partial.find("uint4") == std::string::npos && partial.find("uint2") == std::string::npos);
    CHECK(partial.find("__shared__") == std::string::npos);
    check_compiles(code);
  }
  ember::CudaCode code = column_sum_of("bf16[16384,72]{72,1}", "bf16[64]{1}", 8, 72, "bf16[16384,64]{72,1}");
  CHECK(partial_source(code).find("= *(const uint4*)(b0 + ") != std::string::npos);
  check_compiles(code);
}
