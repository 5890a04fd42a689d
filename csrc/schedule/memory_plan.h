#pragma once
#include <cstdint>
#include <vector>

namespace ember {

// One buffer to place: its size and the first and last execution steps that
// touch it (inclusive).
struct Lifetime {
  int buffer = -1;
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

struct MemoryPlan {
  int64_t arena_bytes = 0;
  std::vector<int64_t> offset;  // per buffer id: byte offset in the arena, -1 if not in it
};

// Places buffers in one arena so that buffers whose lifetimes overlap never share
// bytes; buffers that are dead at the same time reuse them. Greedy by size (largest
// first, lowest free offset), 64-byte aligned. Deterministic.
MemoryPlan plan_arena(const std::vector<Lifetime>& buffers, int num_buffers);

}  // namespace ember
