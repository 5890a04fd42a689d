// The column split of the row shapes' vector stages, planned (a reduction across rows: a
// column sum, [C] <- sum over R rows of [R, C]). A vector stage gives each thread of the
// row whole kept lanes, reduced alone, its results through memory. In a kernel of one
// row (a backward's bias and LayerNorm-weight gradients), that is all R x C elements on
// one block; the column split moves the reduction to a first launch, <name>_partial, on
// many blocks, whose partials the kernel then combines (codegen/cuda/column_split.h).
#pragma once
#include <cstdint>
#include <unordered_map>

#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/launch.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

// A column split gives chunk s of the reduced rows to block s of a first launch, which
// writes each column's partial to scratch; the kernel itself then combines the partials
// of each column in chunk order (deterministic) and runs its later stages. About this
// many chunks, of at least kColumnSplitMinRows rows each.
constexpr int64_t kColumnSplitBlocks = 128;  // about one block per SM on an H100 (132)
constexpr int64_t kColumnSplitMinRows = 16;

struct ColumnSplit {
  int64_t chunks = 0;         // chunks of rows; 0: no split
  int64_t scratch_bytes = 0;  // of the kernel's scratch buffer (a buffer schedule_cuda adds to the Program)
  std::unordered_map<int, int64_t> partial_offset;  // vector-stage item (computed id) -> its partials' byte offset
};

// See kColumnSplitBlocks. Only a kernel of one row, printed as one block, whose vector
// stages read nothing this kernel computes (the partial launch runs none of its other
// stages), and only when some vector stage reduces at least two chunks of rows. Adds
// scratch buffer `scratch_id` to info.args and sets info.partial_grid and partial_block.
ColumnSplit plan_column_split(const Program& p, const Schedule& s, const Placement& m, int ki, const CudaLaunch& launch,
                              int scratch_id, CudaKernelInfo& info);

}  // namespace ember
