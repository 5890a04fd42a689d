#include "schedule/split_reductions.h"

#include <algorithm>

namespace ember {

namespace {

// Kernels with at least this many rows keep rows as their only parallelism
// (the launcher also runs split stages serially when rows >= threads).
constexpr int64_t kMaxRows = 64;
// A chunk does at least this many inner iterations: the launcher's grain, what
// pays for a fork/join on hot threads.
constexpr int64_t kMinChunkWork = 16384;
// Chunks per stage. A fixed count (not the thread count) makes the result the
// same for any number of threads; 64 keeps 16 threads evenly loaded.
constexpr int64_t kMaxChunks = 64;
// Vector stages keep one partial per chunk and lane on the stack.
constexpr int64_t kMaxPartials = 32768;

// The chunk count for one stage, or 0 to leave it whole.
int chunks_for(const Stage& st) {
  bool reduces = false;
  for (const auto& item : st.items) {
    if (item.is_scan) return 0;
    reduces |= item.is_reduction;
  }
  // The split dim: the outermost reduced dim of a vector stage, the outermost
  // inner dim of a row stage.
  const size_t dim = st.vector_reduce ? 1 : 0;
  if (!reduces || st.inner.size() <= dim) return 0;
  // The chunk count is decided at the hints; for a symbolic dim it is a capacity, and
  // codegen computes the chunks' span from the call's sizes (codegen/c/kernel.cpp).
  const std::vector<int64_t> inner = hints(st.inner);
  int64_t work = 1;
  for (int64_t x : inner) work *= x;
  int64_t chunks = std::min({kMaxChunks, work / kMinChunkWork, inner[dim]});
  if (st.vector_reduce) chunks = std::min(chunks, kMaxPartials / std::max<int64_t>(1, inner[0]));
  return chunks >= 2 ? static_cast<int>(chunks) : 0;
}

}  // namespace

void split_reductions(Schedule& s) {
  for (auto& k : s.kernels) {
    // A symbolic row count may be small at any hint (a batch of one sequence): its long
    // stages split too, and the launcher picks per call, from the call's rows, between
    // chunks on the threads and rows on the threads with each row's chunks in turn.
    if (k.outer_numel().is_static() && k.outer_numel().hint() >= kMaxRows) continue;
    for (auto& st : k.stages) st.split = chunks_for(st);
  }
}

}  // namespace ember
