// CUDA C source for a Schedule: the CUDA dialect of the C printer. The expression
// printer is the CPU path's CEmitter; what differs is how a Kernel's rows and stages map
// onto threads:
//
//   Elementwise  a kernel with no reductions whose items are independent per element
//                (one stage, or only per-row stages): each thread takes 4 or 8
//                elements of rows x inner per grid-stride step, blockDim apart.
//   Transpose    an elementwise kernel whose store and some load are contiguous along
//                different dims: tiles staged through shared memory, read and written
//                coalesced (cuda_transpose.h).
//   RowWarp      rows of at most kWarpRowWork inner iterations per stage (cuda_launch.h):
//                one warp per row (8 rows a block); reductions by warp shuffles,
//                __syncwarp between stages.
//   RowBlock     longer rows: one block per row; reductions by warp shuffles, then the
//                warps' partials through shared memory, __syncthreads between stages.
//
// In the row shapes every thread of a row takes every stage's inner iterations
// tid, tid + threads, ... and ends a reduction holding the row's result, so reduction
// results and per-row values are registers for all later stages (softmax and LayerNorm
// are one pass over the row, as on CPU). Values a later stage reads from memory were
// stored before a barrier. Per-row stores are made by thread 0 of the row. Where it
// fits, a row tile (cuda_row_tile.h) replaces that loop: chunks of 4 or 8 elements read
// and written with vector accesses, and rows short enough kept in registers across
// the stages.
//
// A vector stage (a reduction across rows: a column sum) gives each thread whole kept
// lanes, reduced alone, its results through memory. In a kernel of one row, such stages
// are column-split (cuda_column_split.h): a first launch reduces chunks of the rows on
// many blocks. A scan stage runs on thread 0 of its row: correct and slow when rows are
// few.
//
// A graph with symbols (docs/dynamic_shapes.md) prints its kernels as Elementwise,
// RowWarp or RowBlock, sizes read from the `sym` parameter (the call's symbol values),
// 64-bit indices, and the grid computed at each launch (CudaKernelInfo::grid_units).
// Where a kernel's own dims are static and only its row count is symbolic (a dynamic
// batch or sequence over a fixed width), it keeps the vector path and the row tile,
// for stores and for loads outside Where branches (symbolic_vector_index); no
// transposes, hoisting or column splits, whose plans need static sizes.
//
// Arg-reductions carry a (value, index) pair per thread (cuda_reduction.h).
//
// Not handled yet, and refused with CudaUnsupported (the graph runs eagerly):
// arg-reductions across rows (in a vector stage), split stages, more than
// kMaxCudaSymbols symbols.
//
// The printer's files, all in csrc/codegen: cuda_kernel.cpp drives it (per kernel: the
// launch, the plans, the shape's body); cuda_launch.h chooses the shape and launch;
// cuda_printer.h is what the parts share while printing a kernel. The shapes' bodies:
// cuda_elementwise.h, with the vector path and hoisting of cuda_vector_path.h;
// cuda_transpose.h; cuda_row.h, with cuda_row_tile.h and cuda_column_split.h (vector
// stages). Shared by them: cuda_reduction.h (accumulators) and cuda_vector_access.h.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

// The CUDA printer cannot express this schedule (yet); the message names what.
struct CudaUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CudaKernelInfo {
  enum class Shape : uint8_t { Elementwise, Transpose, RowWarp, RowBlock };
  std::string name;
  std::string function;            // the kernel whose compiled functions run it: `name`, or
                                   // an earlier one whose text is the same but for its buffers
  Shape shape = Shape::Elementwise;
  uint32_t grid = 1;               // blocks; 0 when there is nothing to do
  uint32_t block = 1;              // threads per block
  std::vector<int> args;           // buffer ids, in parameter order (one pointer each)
  std::vector<int> writes;         // the args it stores to, in id order
  std::vector<int> origins;        // graph nodes whose work the kernel does
  // A column split (cuda_column_split.h): <name>_partial runs first on partial_grid
  // blocks of partial_block threads, with the same parameters; 0 when there is none.
  uint32_t partial_grid = 0;
  uint32_t partial_block = 0;
  // Row shapes' row tile (cuda_row_tile.h); row_lanes == 0 when there is none.
  // row_lanes: consecutive elements a thread takes at once (one 16/8/4-byte access per
  // buffer when > 1); row_slots: such chunks a thread keeps in registers across stages
  // (0: a loop that reads memory in every stage); row_cached: buffers read once.
  uint32_t row_lanes = 0;
  uint32_t row_slots = 0;
  std::vector<int> row_cached;
  // Elementwise vector path (kHoistWords, cuda_vector_path.h): per-lane values computed
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

// Symbols a CUDA kernel of a graph with symbols takes: their values travel by value, in
// one `ember_syms` parameter (cuda_prelude.h), so that a launch copies no memory.
constexpr int kMaxCudaSymbols = 16;

struct CudaCode {
  std::string source;                       // prelude + every kernel, in order
  std::string prelude;                      // what every part of a split compile repeats
  std::vector<std::string> kernel_sources;  // parallel to kernels: each kernel's text (a
                                            // comment where it runs another's functions)
  std::vector<CudaKernelInfo> kernels;      // parallel to Schedule::kernels
  std::vector<bool> buffer_in_memory;       // per Program buffer
  // Scratch buffers the kernels need beyond the Program's (column-split partials): ids
  // Program::buffers.size() + j, this many bytes each. The compiled graph adds them to
  // its Program as computed buffers, so the arena plan places them like any other.
  std::vector<int64_t> scratch_bytes;
};

CudaCode generate_cuda(const Program& p, const Schedule& s);

// max-autotune's candidates (runtime/cuda_autotune.h): kernel `k` printed with a launch
// other than the rules' (cuda_launch.h: LaunchChoice), named <kernel>_t<i>, without the
// prelude. None for transposes, for kernels with a column split (its scratch is planned
// for the default launch), and in graphs with symbols; a choice that prints the same
// kernel as the default, or as an earlier choice, is left out.
struct CudaKernelVariant {
  std::string choice_text;  // LaunchChoice::text()
  std::string source;
  CudaKernelInfo info;
};
std::vector<CudaKernelVariant> generate_cuda_variants(const Program& p, const Schedule& s, int k);
const char* cuda_shape_name(CudaKernelInfo::Shape s);

}  // namespace ember
