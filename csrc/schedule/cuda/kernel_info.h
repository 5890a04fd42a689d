// What the runtime needs to know of a CUDA kernel: its launch (shape, grid, block, the
// partial launch of a column split), its buffers, and what its plans decided, as
// schedule_cuda (schedule_cuda.h) chose them.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dim.h"

namespace ember {

// The CUDA path cannot express this schedule (yet); the message names what.
struct CudaUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Symbols a CUDA kernel of a graph with symbols takes: their values travel by value, in
// one `ember_syms` parameter (codegen/cuda/prelude.h), so that a launch copies no memory.
constexpr int kMaxCudaSymbols = 16;

struct CudaKernelInfo {
  enum class Shape : uint8_t { Elementwise, Transpose, RowWarp, RowBlock, ScanColumns };
  std::string name;
  std::string function;            // the kernel whose compiled functions run it: `name`, or
                                   // an earlier one whose text is the same but for its buffers
  Shape shape = Shape::Elementwise;
  uint32_t grid = 1;               // blocks; 0 when there is nothing to do
  uint32_t block = 1;              // threads per block
  std::vector<int> args;           // buffer ids, in parameter order (one pointer each)
  std::vector<int> writes;         // the args it stores to, in id order
  std::vector<int> origins;        // graph nodes whose work the kernel does
  // A first launch, <name>_partial, on partial_grid blocks of partial_block threads, with
  // the same parameters: a column split's partials (column_split.h), or the zeroing of a
  // scatter-add's buffer (schedule_cuda.cpp); 0 when there is none.
  uint32_t partial_grid = 0;
  uint32_t partial_block = 0;
  // Row shapes' row tile (row_tile.h); row_lanes == 0 when there is none.
  // row_lanes: consecutive elements a thread takes at once (one 16/8/4-byte access per
  // buffer when > 1); row_slots: such chunks a thread keeps in registers across stages
  // (0: a loop that reads memory in every stage); row_cached: buffers read once.
  // row_unstored: values kept in its registers that no memory holds (not parameters).
  uint32_t row_lanes = 0;
  uint32_t row_slots = 0;
  std::vector<int> row_cached;
  std::vector<int> row_unstored;
  // Elementwise vector path (kHoistWords, vector_plan.h): per-lane values computed
  // once per thread before the grid-stride loop, and vector words of [C]-like buffers
  // loaded there.
  uint32_t hoisted_values = 0;
  uint32_t hoisted_words = 0;
  // Hoisting holds on grids that are multiples of this (0: not hoisted). The runtime may
  // launch fewer blocks than `grid`, a multiple of it: as many as the SMs hold at once.
  uint32_t grid_multiple = 0;
  // A graph with symbols (docs/dynamic_shapes.md): at a call, the kernel runs on
  // min(ceil(grid_units / grid_per_block), grid_cap) blocks (grid_cap 0: no cap) at that
  // call's symbol values; `grid` is the figure at the hints. grid_per_block == 0: `grid`.
  Dim grid_units;
  int64_t grid_per_block = 0;
  int64_t grid_cap = 0;
};

const char* cuda_shape_name(CudaKernelInfo::Shape s);

}  // namespace ember
