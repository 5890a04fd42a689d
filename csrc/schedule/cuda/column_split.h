// The column split of the row shapes' vector stages, planned (a reduction across rows: a
// column sum, [C] <- sum over R rows of [R, C]). A vector stage gives each thread of the
// row whole kept lanes, reduced alone, its results through memory. In a kernel of few
// rows (a backward's bias and LayerNorm-weight gradients: one row; a channels-last global
// average pool: a row per image), that is a block per row, most of its threads idle
// (C = 32 lanes on 1,024 threads) and each lane's R elements read one after another:
// EfficientNet-B0's squeeze-excitation pool over 64 x 112 x 112 x 32 bf16 took 674 us on
// an H200 where its 51 MB take 15. The column split moves the reduction to a first
// launch, <name>_partial, on many blocks, whose partials the kernel then combines
// (codegen/cuda/column_split.h).
#pragma once
#include <cstdint>
#include <unordered_map>

#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/launch.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

// A column split cuts each row's reduced rows into `chunks` chunks; the first launch
// writes each (row, chunk, column) partial to scratch; the kernel itself then combines the
// partials of each column in a fixed order (deterministic: codegen/cuda/column_split.h)
// and runs its later stages. A kernel of one row whose columns take more than
// kColumnSplitThreads lanes: about kColumnSplitBlocks chunks of at least
// kColumnSplitMinRows rows, a block each, a thread per column. Any other kernel of fewer
// than kColumnSplitBlocks rows: blocks of kColumnSplitThreads threads, `groups` groups of
// `group_lanes` consecutive columns, each group a chunk (the lanes of a warp read
// consecutive columns: coalesced), about kColumnSplitTargetBlocks blocks in all, and at
// most kColumnSplitMaxPartials partials a row. (A one-row kernel of narrow columns took
// the first geometry until 2026-11-28: a training BatchNorm's statistics over 64-256
// channels-last columns then kept a few thousand threads busy.)
constexpr int64_t kColumnSplitBlocks = 128;  // about one block per SM on an H100 (132)
constexpr int64_t kColumnSplitMinRows = 16;
constexpr int64_t kColumnSplitThreads = 256;
constexpr int64_t kColumnSplitTargetBlocks = 1024;  // about 8 blocks of 256 threads an SM
constexpr int64_t kColumnSplitMaxPartials = 65536;

struct ColumnSplit {
  int64_t chunks = 0;         // chunks of each row's reduced rows; 0: no split
  int64_t rows = 1;           // the kernel's rows (outer iterations)
  int64_t blocks_per_row = 0; // of the partial launch: its grid is rows x blocks_per_row
  int64_t groups = 1;         // chunks a block of the partial launch takes, side by side
  int64_t group_lanes = 0;    // threads of a group, which walk the columns together
  int64_t scratch_bytes = 0;  // of the kernel's scratch buffer (a buffer schedule_cuda adds to the Program)
  std::unordered_map<int, int64_t> partial_offset;  // vector-stage item (computed id) -> its partials' byte offset
};

// Columns a thread of the partial launch reduces side by side, `group_lanes` apart (each
// row's loads of all of them in one iteration): the largest divisor of width / group_lanes
// up to kColumnSplitColumnsAThread, or 1 when group_lanes does not divide the width. With
// one column a thread, DeepLabV3's ASPP pool (8 images of 64 x 64 pixels x 2,048 channels,
// bf16, 134 MB) read 2 bytes a thread per load, 4 loads in flight, on 256 blocks: 377 us
// on an H200, where the bytes take about 30. Eight columns give eight times the loads in
// flight at the same grid; a width of at most group_lanes columns is unchanged.
constexpr int64_t kColumnSplitColumnsAThread = 8;
int64_t columns_a_thread(int64_t width, int64_t group_lanes);

// See kColumnSplitBlocks. Only a kernel of fewer than kColumnSplitBlocks rows, printed as a
// block per row, whose vector stages read nothing this kernel computes (the partial launch
// runs none of its other stages), and only when some vector stage reduces at least two
// chunks of rows. Adds scratch buffer `scratch_id` to info.args and sets
// info.partial_grid and partial_block.
ColumnSplit plan_column_split(const Program& p, const Schedule& s, const Placement& m, int ki, const CudaLaunch& launch,
                              int scratch_id, CudaKernelInfo& info);

}  // namespace ember
