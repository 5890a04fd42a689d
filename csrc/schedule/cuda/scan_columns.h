// Scans along a strided dim, as columns (the ScanColumns shape): a cumsum over the time of
// [batch, time, channels] is a scan per (batch, channel) row whose steps are a row of
// channels apart. The row shapes give such a row to one thread of a warp (the scan is
// sequential), so every step of it is a lone 2-byte load: 0.36x Inductor's speed on the
// suite's scan_block. Here a thread still scans one row, but consecutive threads take
// consecutive rows, which are consecutive in memory, so each step of a warp is one
// coalesced load of 32 neighbours; and the scanned dim is cut into `segments` pieces,
// one per warp group of the block, so that there are enough threads in flight:
//
//   pass 1  each thread combines its segment's scan inputs into a total (no stores)
//   carry   the totals of the segments before its own, combined in segment order through
//           shared memory (a fixed order: the result does not depend on timing)
//   pass 2  the stage again over its segment, each scan starting from its carry: every
//           item computed and stored as in the row shapes
//
// Pass 2 reads what pass 1 read a moment before, from L1 or L2. A scan that reads another
// scan of the stage (cumsum of a cumsum) could not total its segment in pass 1 without
// the other's carry: such a kernel takes one segment (no pass 1). Only a kernel of one
// stage over one static scanned dim, with no other reduction, in a graph without
// symbols; and only where the rows' innermost dim is the contiguous one (the scans' store
// index has coefficient 1 there), else the row shapes keep it.
#pragma once
#include <cstdint>
#include <vector>

#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/launch.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

// Threads in flight wanted (about an H100's or H200's resident threads: 132 SMs x 2048),
// the shortest segment worth a carry, and the threads a block has at least.
constexpr int64_t kScanThreadsWanted = int64_t{1} << 18;
constexpr int64_t kScanMinSegment = 16;
constexpr int kScanMinBlock = 256;

struct ScanColumns {
  int segments = 0;     // pieces of the scanned dim, one per group of `columns` threads; 0: not this plan
  int columns = 0;      // rows (columns of the tensor) a block takes, a multiple of 32
  int64_t length = 0;   // scanned elements a segment (the last one may have fewer)
  int64_t extent = 0;   // the scanned dim
  std::vector<int> carried;  // the stage's scan items (their indices in the stage), carried across segments
};

// The plan for kernel `k` (segments 0 when it does not apply); when it applies, the
// launch becomes the ScanColumns shape: launch.shape, info.shape, grid and block.
ScanColumns plan_scan_columns(const Program& p, const Schedule& s, int k, CudaLaunch& launch, CudaKernelInfo& info);

}  // namespace ember
