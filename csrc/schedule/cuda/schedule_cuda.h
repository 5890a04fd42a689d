// The CUDA schedule: every decision the CUDA printer needs, as data, made per kernel by
// one pass. For each kernel of the fusion Schedule:
//
//   its buffers      the parameters (what it stores, what it reads other than locally);
//                    values that only its own later stages read, which its row tile
//                    keeps, are stored nowhere (the placement changed to say so)
//   its launch       shape, grid, block, loop geometry (launch.h), and for the Transpose
//                    shape the tiles (transpose_plan.h); LaunchChoice overrides a rule
//   its plans        the elementwise vector path and hoisting (vector_plan.h), the row
//                    tile (row_tile.h), the column split of vector stages (column_split.h),
//                    scans along a strided dim as columns (scan_columns.h)
//   its scratch      a column split's partials: a buffer added to the Program, which the
//                    memory plan then places like any intermediate
//
// The printers (codegen/cuda/kernel.h) read a CudaKernelSchedule and decide nothing;
// max-autotune varies a LaunchChoice and schedules one kernel again
// (schedule_cuda_kernel). What it refuses throws CudaUnsupported (kernel_info.h): the
// graph then runs eagerly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/cuda/column_split.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/launch.h"
#include "schedule/cuda/row_tile.h"
#include "schedule/cuda/scan_columns.h"
#include "schedule/cuda/vector_plan.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

struct CudaKernelSchedule {
  int kernel = 0;            // its index in Schedule::kernels
  CudaKernelInfo info;       // the launch and buffers the runtime reads, what the plans chose
  CudaLaunch launch;         // the geometry its body is printed with (and a transpose's tiles)
  VectorPlan vector;         // Elementwise: 16-byte words, hoisted values (lanes 0: none)
  RowTile row_tile;          // row shapes: chunks, registers (lanes 0: none)
  ColumnSplit column_split;  // vector stages of a kernel of one row (chunks 0: none)
  ScanColumns scan;          // the ScanColumns shape's segments (segments 0: another shape)
  int scratch = -1;          // the column split's scratch buffer id, or -1
  int min_blocks = 0;        // __launch_bounds__'s blocks an SM (hoist_min_blocks; 0: none)

  // Every decision, one line per plan (the dump after schedule_cuda; pass tests).
  std::string text() const;
  uint64_t hash() const;  // of text(): equal schedules, equal hashes
};

struct CudaSchedule {
  Placement placement;                      // per buffer (scratch buffers included): in memory?
  std::vector<CudaKernelSchedule> kernels;  // parallel to Schedule::kernels
  std::string text() const;
};

// Per kernel, what to do otherwise than the rules (max-autotune); a kernel past the end
// takes the default.
using LaunchChoices = std::vector<LaunchChoice>;

// Schedules every kernel of `s` and adds their scratch buffers to `p` (u8 computed
// buffers, in memory). A kernel whose row tile keeps a value that is in memory only for
// the kernel's own later stages (Placement::own_reads_only) is planned again with it out
// of memory, and that plan taken when its tile still keeps the value (RowTile::unstored).
// Throws CudaUnsupported for what the CUDA path cannot express yet.
CudaSchedule schedule_cuda(Program& p, const Schedule& s, const LaunchChoices& choices = {});

// Kernel `k` alone under `choice`, its scratch (if it splits) numbered `scratch_id`;
// `m` is the schedule's placement. Adds nothing to the Program. A value `m` leaves out of
// memory must be kept by the result's row tile (tile_keeps_unstored), or it cannot run.
CudaKernelSchedule schedule_cuda_kernel(const Program& p, const Schedule& s, const Placement& m, int k,
                                        const LaunchChoice& choice, int scratch_id);

}  // namespace ember
