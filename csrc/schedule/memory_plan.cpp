#include "schedule/memory_plan.h"

#include <algorithm>

namespace ember {

namespace {
constexpr int64_t kAlign = 64;
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

MemoryPlan plan_arena(const std::vector<Lifetime>& buffers, int num_buffers) {
  MemoryPlan plan;
  plan.offset.assign(num_buffers, -1);
  std::vector<Lifetime> order = buffers;
  std::stable_sort(order.begin(), order.end(), [](const Lifetime& a, const Lifetime& b) { return a.bytes > b.bytes; });
  struct Placed {
    int64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;
  for (const Lifetime& l : order) {
    int64_t size = align_up(std::max<int64_t>(l.bytes, 1));
    // Byte ranges of placed buffers alive at the same time, by start.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed)
      if (p.first <= l.last && l.first <= p.last) busy.push_back({p.begin, p.end});
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + size <= b) break;
      at = std::max(at, e);
    }
    placed.push_back({at, at + size, l.first, l.last});
    plan.offset[l.buffer] = at;
    plan.arena_bytes = std::max(plan.arena_bytes, at + size);
  }
  return plan;
}

}  // namespace ember
