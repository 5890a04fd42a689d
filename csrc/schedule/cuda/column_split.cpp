#include "schedule/cuda/column_split.h"

#include <algorithm>

#include "ir/affine.h"
#include "schedule/accumulator.h"
#include "schedule/cuda/vector_access.h"  // vector_index

namespace ember {

namespace {

// Every var's extent in a stage of kernel k: its outer dims and the stage's inner ones.
std::unordered_map<int, int64_t> stage_extents(const Kernel& k, const Stage& stage) {
  std::unordered_map<int, int64_t> extents;
  for (size_t d = 0; d < k.outer.size(); ++d) extents[outer_var(static_cast<int>(d))] = k.outer[d].hint();
  for (size_t d = 0; d < stage.inner.size(); ++d) extents[inner_var(static_cast<int>(d))] = stage.inner[d].hint();
  return extents;
}

// See kColumnSplitVectorBlocks: the vector geometry of kernel k's split, into `split`
// (its rows already set), or false when the kernel's stages do not allow one.
bool plan_vector_geometry(const Program& p, const Kernel& k, int64_t most_rows, ColumnSplit& split) {
  int64_t width = 0, widest_type = 0;
  for (const auto& st : k.stages) {
    if (!st.vector_reduce) continue;
    if (is_symbolic(st.inner) || (width != 0 && st.inner[0].hint() != width)) return false;
    width = st.inner[0].hint();
    // At one lane column_words checks the strides and bounds; its words' dtypes give the lanes.
    auto words = column_words(p, k, st, 1);
    if (!words) return false;
    for (const auto& w : *words) widest_type = std::max<int64_t>(widest_type, dtype_size(p.buffers[w.buffer].dtype));
  }
  if (widest_type == 0 || widest_type > 4) return false;  // no words, or 8-byte ones
  const int64_t lanes = std::min<int64_t>(8, 16 / widest_type);
  if (width % lanes != 0) return false;
  for (const auto& st : k.stages)
    if (st.vector_reduce && !column_words(p, k, st, static_cast<int>(lanes))) return false;
  const int64_t across = width / lanes;
  int64_t threads = std::min(across, kColumnSplitVectorThreads);
  while (across % threads != 0) --threads;
  // Bytes of shared memory a group's accumulators take.
  int64_t group_bytes = 0;
  for (const auto& st : k.stages) {
    if (!st.vector_reduce) continue;
    const int64_t rows = numel(st.inner) / st.inner[0].hint();
    for (const auto& item : st.items) group_bytes += threads * lanes * accumulator_bytes(p.computed[item.computed], rows);
  }
  int64_t groups = kColumnSplitThreads / threads;
  while (groups > 1 && groups * group_bytes > kColumnSplitVectorShared) groups /= 2;
  if (groups * group_bytes > kColumnSplitVectorShared) return false;
  const int64_t tiles = across / threads;
  int64_t chunks = (kColumnSplitVectorBlocks + split.rows * tiles - 1) / (split.rows * tiles);
  chunks = std::min({chunks, most_rows / (groups * kColumnSplitVectorRows), std::max<int64_t>(1, kColumnSplitMaxPartials / width)});
  if (chunks < 2) return false;
  split.lanes = lanes;
  split.column_threads = threads;
  split.tiles = tiles;
  split.row_groups = groups;
  split.chunks = chunks;
  split.blocks_per_row = chunks * tiles;
  return true;
}

}  // namespace

int column_word_bytes(DType t, int lanes) {
  const int64_t bytes = dtype_size(t) * lanes;
  if (dtype_size(t) > 4 || (lanes > 1 && bytes != 4 && bytes != 8 && bytes != 16)) return 0;
  return static_cast<int>(bytes);
}

std::optional<std::vector<ColumnWord>> column_words(const Program& p, const Kernel& k, const Stage& stage, int lanes) {
  const auto extents = stage_extents(k, stage);
  const int column = inner_var(0);
  std::vector<ColumnWord> words;
  bool ok = true;
  for (const auto& item : stage.items)
    walk_loads(item.value, [&](const Expr& e) {
      const Expr& index = e->args[0];
      if (!ok || !depends_on(index, column)) return;
      bool rows = false;
      for (size_t d = 1; d < stage.inner.size(); ++d) rows = rows || depends_on(index, inner_var(static_cast<int>(d)));
      if (!rows) return;  // a column's own value (a BatchNorm's scale): read once a column, not a row
      const int b = static_cast<int>(e->ival);
      if (column_word_bytes(p.buffers[b].dtype, lanes) == 0 || !vector_index(p, index, b, column, lanes, extents)) {
        ok = false;
        return;
      }
      auto w = std::find_if(words.begin(), words.end(), [&](const ColumnWord& x) { return x.buffer == b && same_index(x.index, index); });
      if (w == words.end()) {
        words.push_back({b, index, {}});
        w = words.end() - 1;
      }
      if (std::none_of(w->loads.begin(), w->loads.end(), [&](const Expr& l) { return equal(l, e); })) w->loads.push_back(e);
    });
  if (!ok) return std::nullopt;
  return words;
}

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
  if (plan_vector_geometry(p, k, most_rows, split)) {
    // The vector geometry: see kColumnSplitVectorBlocks.
  } else if (split.rows == 1 && lanes > kColumnSplitThreads) {
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
  info.partial_block = static_cast<uint32_t>(split.lanes > 0 ? split.column_threads * split.row_groups
                                                            : split.group_lanes * split.groups);
  return split;
}

}  // namespace ember
