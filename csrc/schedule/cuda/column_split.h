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
#include <optional>
#include <unordered_map>
#include <vector>

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

// The vector geometry of the partial launch, taken when every vector stage of the kernel
// has the same width, a multiple of `lanes`, and every load that varies along both the
// columns and the rows addresses `lanes` consecutive columns at a multiple of `lanes`
// (column_words): a thread owns `lanes` consecutive columns (8 of 1-2 bytes or 4 fp32:
// one 16-byte load a row, lanes of a narrower dtype beside a 4-byte one in 8 or 4 bytes).
// A block is `row_groups` groups of `column_threads` threads; the groups walk a chunk's
// rows interleaved (group g rows g, g + row_groups, ...) over one tile of column_threads
// x lanes columns, and add their accumulators through shared memory in group order into
// the chunk's partial (a fixed order: deterministic). The grid is rows x chunks x tiles,
// about kColumnSplitVectorBlocks blocks. A tile is at most kColumnSplitVectorThreads
// threads wide (128 bytes of a row: a warp reads four whole 128-byte lines, of four
// rows), because the kernel combines every partial on one block: the partials a row
// are blocks x tile width, so 256-column tiles would make 4 times the partials (1 MB of
// doubles for 528 blocks) for that one block to read. Scalar loads (one column a thread,
// 1-2 bytes a load: 8-16% of the copy's bandwidth on an H200 for ResNet-50's and
// ConvNeXt-T's training column sums) had too few bytes in flight whatever the rows in
// flight. When a vector word's buffer is not aligned to its word at run time, the same
// geometry runs with scalar loads.
constexpr int64_t kColumnSplitVectorBlocks = 4 * 132;  // 4 blocks of 256 threads an SM on an H100/H200
constexpr int64_t kColumnSplitVectorThreads = 8;       // threads across a tile's columns, at most
constexpr int64_t kColumnSplitVectorRows = 8;          // rows of a chunk a thread reads, at least
constexpr int64_t kColumnSplitVectorShared = 32 * 1024;  // bytes of the groups' accumulators, at most (else fewer groups)

struct ColumnSplit {
  int64_t chunks = 0;         // chunks of each row's reduced rows; 0: no split
  int64_t rows = 1;           // the kernel's rows (outer iterations)
  int64_t blocks_per_row = 0; // of the partial launch: its grid is rows x blocks_per_row
  int64_t groups = 1;         // chunks a block of the partial launch takes, side by side
  int64_t group_lanes = 0;    // threads of a group, which walk the columns together
  // The vector geometry (kColumnSplitVectorBlocks); lanes == 0: the scalar one above.
  int64_t lanes = 0;           // consecutive columns a thread owns, read at once
  int64_t column_threads = 0;  // threads across a tile
  int64_t tiles = 0;           // tiles of column_threads x lanes columns across the width
  int64_t row_groups = 0;      // groups of column_threads threads a block, one chunk
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

// A load of a vector stage that the vector geometry reads as one access of `lanes`
// consecutive columns (lane u at column c0 + u, c0 a multiple of `lanes`): one whose
// index varies along the columns (inner[0]) and along the rows. `loads`: the Load
// expressions it stands for (the same buffer and index).
struct ColumnWord {
  int buffer = 0;
  Expr index;
  std::vector<Expr> loads;
};
// Bytes of one word of `lanes` elements of `t` (4, 8 or 16), or 0 when the vector geometry
// reads no such word: elements of 8 bytes (a ReLU backward's bool mask is one of 1 byte).
int column_word_bytes(DType t, int lanes);
// The words of `stage` (a vector stage of kernel k) at `lanes` lanes, or nullopt when
// some load that varies along the columns and the rows is not such an access (a dtype of
// 8 bytes, a column stride other than 1, an offset that is not a multiple of `lanes`, an
// index not provably inside its buffer).
std::optional<std::vector<ColumnWord>> column_words(const Program& p, const Kernel& k, const Stage& stage, int lanes);

// See kColumnSplitBlocks. Only a kernel of fewer than kColumnSplitBlocks rows, printed as a
// block per row, whose vector stages read nothing this kernel computes (the partial launch
// runs none of its other stages), and only when some vector stage reduces at least two
// chunks of rows. The vector geometry where the stages allow it (kColumnSplitVectorBlocks),
// else the scalar one. Adds scratch buffer `scratch_id` to info.args and sets
// info.partial_grid and partial_block.
ColumnSplit plan_column_split(const Program& p, const Schedule& s, const Placement& m, int ki, const CudaLaunch& launch,
                              int scratch_id, CudaKernelInfo& info);

}  // namespace ember
