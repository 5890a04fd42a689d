// CUDA C source for a Schedule and its CUDA schedule (schedule/cuda/schedule_cuda.h),
// which made every decision: the CUDA dialect of the C printer. The expression printer
// is the CPU path's CEmitter; what differs is how a Kernel's rows and stages map onto
// threads:
//
//   Elementwise  a kernel with no reductions whose items are independent per element
//                (one stage, or only per-row stages): each thread takes 4 or 8
//                elements of rows x inner per grid-stride step, blockDim apart.
//   Transpose    an elementwise kernel whose store and some load are contiguous along
//                different dims: tiles staged through shared memory, read and written
//                coalesced (transpose.h).
//   RowWarp      rows of at most kWarpRowWork inner iterations per stage (launch.h):
//                one warp per row (8 warps a block), or for a short row in a row tile
//                several rows a warp, each on a power-of-two group of its lanes
//                (row_tile.h); reductions by shuffles among the row's lanes,
//                __syncwarp (over those lanes) between stages.
//   RowBlock     longer rows: one block per row; reductions by warp shuffles, then the
//                warps' partials through shared memory, __syncthreads between stages.
//   ScanColumns  a kernel of one scan stage along a strided dim (scan_columns.h): a
//                thread a row, consecutive threads consecutive rows (coalesced steps),
//                the scanned dim in segments whose totals carry through shared memory.
//
// In the row shapes every thread of a row takes every stage's inner iterations
// tid, tid + threads, ... and ends a reduction holding the row's result, so reduction
// results and per-row values are registers for all later stages (softmax and LayerNorm
// are one pass over the row, as on CPU). Values a later stage reads from memory were
// stored before a barrier. Per-row stores are made by thread 0 of the row. Where it
// fits, a row tile (row_tile.h) replaces that loop: chunks of 4 or 8 elements read
// and written with vector accesses, and rows short enough kept in registers across
// the stages.
//
// A vector stage (a reduction across rows: a column sum) gives each thread whole kept
// lanes, reduced alone, its results through memory. In a kernel of one row, such stages
// are column-split (column_split.h): a first launch reduces chunks of the rows on
// many blocks. A scan stage the ScanColumns shape does not take runs on thread 0 of its
// row: correct and slow when rows are few.
//
// A graph with symbols (docs/dynamic_shapes.md) prints its kernels as Elementwise,
// RowWarp or RowBlock, sizes read from the `sym` parameter (the call's symbol values),
// 64-bit indices, and the grid computed at each launch (CudaKernelInfo::grid_units).
// Where a kernel's own dims are static and only its row count is symbolic (a dynamic
// batch or sequence over a fixed width), it keeps the vector path and the row tile,
// for stores and for loads outside Where branches (symbolic_vector_index); no
// transposes, hoisting or column splits, whose plans need static sizes.
//
// Arg-reductions carry a (value, index) pair per thread (reduction.h).
//
// Not handled yet, and refused by schedule_cuda with CudaUnsupported (the graph runs
// eagerly): arg-reductions across rows (in a vector stage), split stages, more than
// kMaxCudaSymbols symbols.
//
// The printer's files, all in csrc/codegen/cuda: kernel.cpp prints each kernel (its
// signature, its shape's body); printer.h is what the parts share while printing a
// kernel. The shapes' bodies: elementwise.h, with the vector path and hoisting of
// vector_path.h; transpose.h; row.h, with row_tile.h and column_split.h (vector
// stages); scan_columns.h. Shared by them: reduction.h (accumulators) and vector_access.h. The
// decisions they print are schedule/cuda's.
#pragma once
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/schedule_cuda.h"
#include "schedule/kernel.h"

namespace ember {

struct CudaCode {
  std::string source;                       // prelude + every kernel, in order
  std::string prelude;                      // what every part of a split compile repeats
  std::vector<std::string> kernel_sources;  // parallel to kernels: each kernel's text (a
                                            // comment where it runs another's functions)
  std::vector<CudaKernelInfo> kernels;      // parallel to Schedule::kernels
  std::vector<bool> buffer_in_memory;       // per Program buffer (scratch buffers included)
};

CudaCode generate_cuda(const Program& p, const Schedule& s, const CudaSchedule& cs);

// max-autotune's candidates (runtime/cuda_autotune.cpp): kernel `k` scheduled again under
// each launch other than the rules' (launch.h: LaunchChoice, launch_alternatives) and
// printed, named <kernel>_t<i>, without the prelude. None for transposes, for kernels
// with a column split (its scratch is planned for the default launch), and in graphs
// with symbols; a choice that prints the same kernel as the default, or as an earlier
// choice, is left out, and so is one whose row tile does not keep the values the rules
// keep in registers only (RowTile::unstored: no memory holds them).
struct CudaKernelVariant {
  std::string choice_text;  // LaunchChoice::text()
  std::string source;
  CudaKernelInfo info;
};
std::vector<CudaKernelVariant> generate_cuda_variants(const Program& p, const Schedule& s, const CudaSchedule& cs,
                                                      int k);

}  // namespace ember
