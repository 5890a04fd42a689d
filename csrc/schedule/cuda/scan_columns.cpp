#include "schedule/cuda/scan_columns.h"

#include <algorithm>
#include <set>

namespace ember {

ScanColumns plan_scan_columns(const Program& p, const Schedule& s, int k, CudaLaunch& launch, CudaKernelInfo& info) {
  const Kernel& kernel = s.kernels[k];
  if (launch.symbolic || kernel.stages.size() != 1 || kernel.outer.empty()) return {};
  const Stage& stage = kernel.stages[0];
  if (stage.vector_reduce || stage.inner.size() != 1 || !stage.inner[0].is_static()) return {};
  const int64_t extent = stage.inner[0].hint();
  if (extent < 2 || launch.rows < 1) return {};
  const int last_outer = outer_var(static_cast<int>(kernel.outer.size()) - 1);
  ScanColumns plan;
  plan.extent = extent;
  std::set<int> after_scan;  // buffers of the stage's scans and of the items that read them
  bool chained = false;      // a scan reads another: no segments
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const KernelItem& item = stage.items[i];
    const ComputedBuffer& c = p.computed[item.computed];
    if (item.is_reduction) return {};
    bool reads_scan = false;
    walk_loads(item.value, [&](const Expr& e) { reads_scan |= after_scan.count(static_cast<int>(e->ival)) > 0; });
    if (reads_scan || item.is_scan) after_scan.insert(c.buffer);
    if (!item.is_scan) continue;
    // Pass 1 computes each total from the inputs alone (a scan of a scan would need the
    // first one's carry first): such a kernel scans each column whole, in one segment.
    chained |= reads_scan;
    // Consecutive rows, consecutive elements: coalesced steps (else a row is contiguous
    // along the scan, and the row shapes' loop is the better one).
    auto along_rows = coefficient(item.store_index, last_outer);
    if (!along_rows || *along_rows != 1) return {};
    plan.carried.push_back(static_cast<int>(i));
  }
  if (plan.carried.empty()) return {};
  // Segments: a power of two, enough for kScanThreadsWanted threads, each at least
  // kScanMinSegment long, at most 32 (a block of 32 columns a segment is 1024 threads).
  // The totals' shared memory (8 bytes an item a thread at most) stays within 32 KiB.
  const int64_t carried = static_cast<int64_t>(plan.carried.size());
  auto columns_for = [](int segments) { return std::max(32, kScanMinBlock / segments); };
  int segments = 1;
  while (!chained && segments < 32 && launch.rows * segments < kScanThreadsWanted && extent / (2 * segments) >= kScanMinSegment &&
         carried * 8 * columns_for(2 * segments) * 2 * segments <= 32768)
    segments *= 2;
  plan.segments = segments;
  plan.length = (extent + segments - 1) / segments;
  plan.columns = columns_for(segments);
  // Not more columns a block than rows, in whole warps.
  while (plan.columns > 32 && plan.columns / 2 >= launch.rows) plan.columns /= 2;
  launch.shape = CudaKernelInfo::Shape::ScanColumns;
  launch.threads = 1;
  launch.rows_per_block = plan.columns;
  launch.wide = launch.rows + plan.columns >= (int64_t{1} << 31) || extent >= (int64_t{1} << 31);
  info.shape = launch.shape;
  info.block = static_cast<uint32_t>(plan.columns * segments);
  info.grid = static_cast<uint32_t>((launch.rows + plan.columns - 1) / plan.columns);
  return plan;
}

}  // namespace ember
