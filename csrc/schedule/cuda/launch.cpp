#include "schedule/cuda/launch.h"

#include "schedule/cuda/column_split.h"

#include <algorithm>
#include <cstdlib>


namespace ember {

namespace {

constexpr int64_t kInt32Limit = int64_t{1} << 31;

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

const char* cuda_shape_name(CudaKernelInfo::Shape s) {
  switch (s) {
    case CudaKernelInfo::Shape::Elementwise: return "elementwise";
    case CudaKernelInfo::Shape::Transpose: return "transpose";
    case CudaKernelInfo::Shape::RowWarp: return "row_warp";
    case CudaKernelInfo::Shape::ScanColumns: return "scan_columns";
    default: return "row_block";
  }
}

int elementwise_elems_per_thread(int64_t max_elem_bytes) { return max_elem_bytes <= 2 ? 8 : 4; }

std::string LaunchChoice::text() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (elementwise_block != kElementwiseBlock) add("block " + std::to_string(elementwise_block));
  if (rows_per_warp_block != kRowsPerWarpBlock) add(std::to_string(rows_per_warp_block) + " warps a block");
  if (row_block) add("a block per row");
  if (row_threads_shift != 0)
    add(std::string("threads per row ") + (row_threads_shift > 0 ? "x" : "/") + std::to_string(1 << std::abs(row_threads_shift)));
  return out.empty() ? "default" : out;
}

void pack_warp_rows(CudaLaunch& l, CudaKernelInfo& info, int threads) {
  const int warps = static_cast<int>(info.block / 32);
  l.threads = threads;
  l.rows_per_block = warps * (32 / threads);
  info.grid = static_cast<uint32_t>((l.rows + l.rows_per_block - 1) / l.rows_per_block);
  l.wide |= l.rows + l.rows_per_block >= kInt32Limit;
  if (info.grid_per_block) info.grid_per_block = l.rows_per_block;
}

void pack_short_rows(const Kernel& k, CudaLaunch& l, CudaKernelInfo& info) {
  if (l.shape != CudaKernelInfo::Shape::RowWarp || l.threads != 32) return;
  int64_t longest = 1;
  for (const auto& st : k.stages) {
    if (st.vector_reduce || is_symbolic(st.inner)) return;
    for (const auto& item : st.items)
      if (item.is_scan) return;
    longest = std::max(longest, numel(st.inner));
  }
  const int64_t threads = pow2_at_least(longest);
  if (threads <= 16) pack_warp_rows(l, info, static_cast<int>(threads));
}

std::vector<LaunchChoice> launch_alternatives(const CudaLaunch& launch) {
  std::vector<LaunchChoice> out;
  if (launch.symbolic) return out;
  switch (launch.shape) {
    case CudaKernelInfo::Shape::Elementwise:
      for (int block : {128, 512, 1024}) {
        LaunchChoice c;
        c.elementwise_block = block;
        out.push_back(c);
      }
      break;
    case CudaKernelInfo::Shape::RowWarp:
      for (int rows : {4, 16}) {
        LaunchChoice c;
        c.rows_per_warp_block = rows;
        out.push_back(c);
      }
      out.push_back(LaunchChoice{});
      out.back().row_block = true;
      break;
    case CudaKernelInfo::Shape::RowBlock:
      for (int shift : {-1, 1}) {
        const int threads = launch.threads * (shift > 0 ? 2 : 1) / (shift < 0 ? 2 : 1);
        if (threads < 64 || threads > 1024) continue;
        LaunchChoice c;
        c.row_threads_shift = shift;
        out.push_back(c);
      }
      break;
    case CudaKernelInfo::Shape::Transpose:
    case CudaKernelInfo::Shape::ScanColumns:
      break;
  }
  return out;
}

CudaLaunch choose_launch(const Program& p, const Kernel& k, const std::vector<bool>& in_memory, CudaKernelInfo& info,
                         const LaunchChoice& choice) {
  CudaLaunch l;
  bool reductions = false, all_row_scope = true;
  int64_t work = 1;  // at the hints: it only chooses between the row shapes
  for (const auto& st : k.stages) {
    all_row_scope &= st.inner.empty();
    work = std::max(work, numel(st.inner));
    for (const auto& item : st.items) reductions |= p.computed[item.computed].is_reduction || item.is_scan;
  }
  l.symbolic = p.num_symbols > 0;
  l.rows_dim = k.outer_numel();
  l.rows = l.rows_dim.hint();
  // A size may grow without bound at run time: every index is 64-bit.
  auto grid_from = [&](const Dim& units, int64_t per_block, int64_t cap) {
    if (!l.symbolic) return;
    l.wide = true;
    info.grid_units = units;
    info.grid_per_block = per_block;
    info.grid_cap = cap;
  };
  if (!reductions && (k.stages.size() == 1 || all_row_scope)) {
    l.shape = CudaKernelInfo::Shape::Elementwise;
    l.total_dim = l.rows_dim * (all_row_scope ? Dim(1) : product(k.stages[0].inner));
    l.total = l.total_dim.hint();
    int64_t max_elem_bytes = 1;
    for (int b : info.args) max_elem_bytes = std::max(max_elem_bytes, dtype_size(p.buffers[b].dtype));
    l.per_thread = elementwise_elems_per_thread(max_elem_bytes);
    l.block = choice.elementwise_block;
    const int64_t tile = int64_t{l.block} * l.per_thread;
    info.block = static_cast<uint32_t>(l.block);
    info.grid = static_cast<uint32_t>(std::min(kMaxElementwiseGrid, (l.total + tile - 1) / tile));
    l.wide = l.total + static_cast<int64_t>(info.grid) * tile >= kInt32Limit;
    grid_from(l.total_dim, tile, kMaxElementwiseGrid);
    // A store and a load contiguous along different dims: tiles through shared memory
    // (not for zero elements: the kernel is not launched, and a tile of a side of length
    // 0 is no tile). With symbols, a block per tile up to the cap, counted per call.
    if (l.total > 0 && !k.scatter_adds() && (l.transpose = plan_transpose(p, k, in_memory))) {
      l.shape = CudaKernelInfo::Shape::Transpose;
      info.block = kTransposeThreads;
      info.grid = l.transpose->grid();
      grid_from(l.transpose->tiles(), 1, kMaxTransposeGrid);
    }
  } else if (work <= kWarpRowWork && !choice.row_block) {
    l.shape = CudaKernelInfo::Shape::RowWarp;
    l.threads = 32;
    l.rows_per_block = choice.rows_per_warp_block;
    info.block = static_cast<uint32_t>(32 * l.rows_per_block);
    info.grid = static_cast<uint32_t>((l.rows + l.rows_per_block - 1) / l.rows_per_block);
    l.wide = l.rows + l.rows_per_block >= kInt32Limit || work >= kInt32Limit;
    grid_from(l.rows_dim, l.rows_per_block, 0);
  } else {
    l.shape = CudaKernelInfo::Shape::RowBlock;
    // About sixteen inner iterations per thread (independent loads in flight, fewer
    // barriers per element), between two warps and 1024 threads.
    l.threads = static_cast<int>(std::clamp<int64_t>(pow2_at_least((work + 15) / 16), 64, 1024));
    // A kernel of many rows (no column split) whose long stages are vector stages (a
    // thread a column: split_long_reductions' [chunks, columns] partials) gets a thread a
    // column, not idle threads: 1,024 threads for 64 columns held an SM's threads with 6%
    // of them working.
    int64_t columns = 0;
    bool by_columns = !l.symbolic && l.rows >= kColumnSplitBlocks;
    for (const auto& st : k.stages) {
      if (st.vector_reduce) columns = std::max(columns, st.inner[0].hint());
    }
    for (const auto& st : k.stages)
      by_columns &= st.vector_reduce || product(st.inner).hint() <= columns;
    if (by_columns && columns > 0) l.threads = static_cast<int>(std::clamp<int64_t>(pow2_at_least(columns), 64, 1024));
    if (choice.row_threads_shift > 0) l.threads = std::min(1024, l.threads << choice.row_threads_shift);
    if (choice.row_threads_shift < 0) l.threads = std::max(64, l.threads >> -choice.row_threads_shift);
    info.block = l.threads;
    if (l.rows >= kInt32Limit) throw CudaUnsupported("CUDA codegen: more than 2^31 rows in kernel " + k.name);
    info.grid = static_cast<uint32_t>(l.rows);
    l.wide = work + l.threads >= kInt32Limit;
    grid_from(l.rows_dim, 1, 0);
  }
  // Nothing to do: not launched (a graph with symbols decides per call, grid_at).
  if (l.rows == 0 || (l.shape == CudaKernelInfo::Shape::Elementwise && l.total == 0)) info.grid = 0;
  info.shape = l.shape;
  return l;
}

}  // namespace ember
