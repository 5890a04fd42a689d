#include "schedule/cuda/column_split.h"

#include <algorithm>

#include "schedule/accumulator.h"

namespace ember {

int64_t columns_a_thread(int64_t width, int64_t group_lanes) {
  if (group_lanes <= 0 || width % group_lanes != 0) return 1;
  const int64_t passes = width / group_lanes;
  for (int64_t d = std::min(passes, kColumnSplitColumnsAThread); d > 1; --d)
    if (passes % d == 0) return d;
  return 1;
}

ColumnSplit plan_column_split(const Program& p, const Schedule& s, const Placement& m, int ki, const CudaLaunch& launch,
                              int scratch_id, CudaKernelInfo& info) {
  const Kernel& k = s.kernels[ki];
  if (launch.shape != CudaKernelInfo::Shape::RowBlock || launch.rows < 1 || launch.rows >= kColumnSplitBlocks) return {};
  int64_t most_rows = 0, widest = 0;
  for (const auto& st : k.stages) {
    if (!st.vector_reduce) continue;
    bool own = false;
    for (const auto& item : st.items)
      walk_loads(item.value, [&](const Expr& e) { own |= m.producer[e->ival].kernel == ki; });
    // A kept dim of size 0: no columns to split (and no division by their count).
    if (own || st.inner[0].hint() == 0) return {};
    most_rows = std::max(most_rows, numel(st.inner) / st.inner[0].hint());
    widest = std::max(widest, st.inner[0].hint());
  }
  if (most_rows < 2 * kColumnSplitMinRows) return {};
  ColumnSplit split;
  split.rows = launch.rows;
  const int64_t lanes = std::clamp<int64_t>((widest + 31) / 32 * 32, 32, 1024);
  if (split.rows == 1 && lanes > kColumnSplitThreads) {
    // Wide columns of one row (a linear layer's bias or LayerNorm-weight gradient): a
    // block of `lanes` threads a chunk, about kColumnSplitBlocks chunks. Blocks of 256
    // threads taking three of 768 columns each made BERT's LayerNorm-weight gradients 25%
    // slower on an H200 (1,541 us a step for 13 calls).
    const int64_t span = std::max(kColumnSplitMinRows, (most_rows + kColumnSplitBlocks - 1) / kColumnSplitBlocks);
    split.chunks = (most_rows + span - 1) / span;
    split.blocks_per_row = split.chunks;
    split.group_lanes = lanes;
  } else {
    split.group_lanes = std::min(lanes, kColumnSplitThreads);
    split.groups = kColumnSplitThreads / split.group_lanes;
    int64_t chunks = (kColumnSplitTargetBlocks + split.rows - 1) / split.rows * split.groups;
    chunks = std::min({chunks, most_rows / kColumnSplitMinRows, std::max<int64_t>(1, kColumnSplitMaxPartials / widest)});
    split.blocks_per_row = (chunks + split.groups - 1) / split.groups;
    split.chunks = split.blocks_per_row * split.groups;  // a block's last groups may get no rows
    if (split.chunks < 2) return {};
  }
  // Each vector stage's reduction items get chunks x C partials of their accumulator type.
  for (const auto& st : k.stages) {
    if (!st.vector_reduce) continue;
    const int64_t rows = numel(st.inner) / st.inner[0].hint();
    for (const auto& item : st.items) {
      const ComputedBuffer& c = p.computed[item.computed];
      split.scratch_bytes = (split.scratch_bytes + 15) / 16 * 16;
      split.partial_offset[item.computed] = split.scratch_bytes;
      split.scratch_bytes += split.rows * split.chunks * st.inner[0].hint() * accumulator_bytes(c, rows);
    }
  }
  info.args.push_back(scratch_id);
  info.partial_grid = static_cast<uint32_t>(split.rows * split.blocks_per_row);
  info.partial_block = static_cast<uint32_t>(split.group_lanes * split.groups);
  return split;
}

}  // namespace ember
