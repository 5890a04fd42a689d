// CUDA C source for a Schedule: the CUDA dialect of the C printer. The expression
// printer is the CPU path's CEmitter; what differs is how a Kernel's rows and stages map
// onto threads:
//
//   Elementwise  a kernel with no reductions whose items are independent per element
//                (one stage, or only per-row stages): each thread takes 4 or 8
//                elements of rows x inner per grid-stride step, blockDim apart.
//   RowWarp      rows of at most kWarpRowWork inner iterations per stage: one warp per
//                row (8 rows a block); reductions by warp shuffles, __syncwarp between
//                stages.
//   RowBlock     longer rows: one block per row; reductions by warp shuffles, then the
//                warps' partials through shared memory, __syncthreads between stages.
//
// In the row shapes every thread of a row takes every stage's inner iterations
// tid, tid + threads, ... and ends a reduction holding the row's result, so reduction
// results and per-row values are registers for all later stages (softmax and LayerNorm
// are one pass over the row, as on CPU). Values a later stage reads from memory were
// stored before a barrier. Per-row stores are made by thread 0 of the row.
//
// A vector stage (a reduction across rows: a column sum) gives each thread whole kept
// lanes, reduced alone, its results through memory; a scan stage runs on thread 0 of its
// row. Both are correct and slow when rows are few: phase 2 splits them.
//
// Not handled yet, and refused with CudaUnsupported (the graph runs eagerly):
// arg-reductions, split stages, symbolic sizes.
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
  enum class Shape : uint8_t { Elementwise, RowWarp, RowBlock };
  std::string name;
  Shape shape = Shape::Elementwise;
  uint32_t grid = 1;               // blocks; 0 when there is nothing to do
  uint32_t block = 1;              // threads per block
  std::vector<int> args;           // buffer ids, in parameter order (one pointer each)
  std::vector<int> origins;        // graph nodes whose work the kernel does
};

struct CudaCode {
  std::string source;                       // prelude + every kernel, in order
  std::string prelude;                      // what every part of a split compile repeats
  std::vector<std::string> kernel_sources;  // parallel to kernels: each kernel's text
  std::vector<CudaKernelInfo> kernels;      // parallel to Schedule::kernels
  std::vector<bool> buffer_in_memory;       // per Program buffer
};

// Inner iterations per stage up to which a row runs on one warp.
constexpr int64_t kWarpRowWork = 1024;

CudaCode generate_cuda(const Program& p, const Schedule& s);
const char* cuda_shape_name(CudaKernelInfo::Shape s);

}  // namespace ember
