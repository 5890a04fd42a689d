#include "schedule/cuda/row_tile.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/affine.h"
#include "schedule/cuda/vector_access.h"

namespace ember {

namespace {

// A row block's threads share the row tile's chunks evenly where whole warps can: the
// 384 chunks of a 3,072-wide bf16 row on 256 threads left half of them idle in the
// second slot; 192 threads take two each. Same slots, fewer threads.
void even_row_block(CudaLaunch& launch, CudaKernelInfo& info, int64_t chunks, int64_t slots) {
  const int64_t even = (chunks + slots - 1) / slots;
  const int64_t threads = (even + 31) / 32 * 32;
  if (threads < 64 || threads >= launch.threads) return;
  launch.threads = static_cast<int>(threads);
  info.block = static_cast<uint32_t>(launch.threads);
}

// A RowWarp row's chunk width and threads, chosen together: lanes of at most
// `max_lanes` elements that divide the row's last dim `last`, threads a power of two up
// to a warp, so that the threads' slots hold as many chunks as they can (the fewest
// idle: a 96-wide bf16 row as 12 chunks of 8 kept 12 of a warp's 32 lanes busy; 4
// threads of 3 slots keep all busy, 8 rows a warp), with at most kRowTileValues
// elements a thread. A row's lanes read at least kRowSegmentBytes of it together, so
// that each warp-wide access still moves whole sectors; half that for a row read element
// by element (an odd length: its neighbours in the warp end and start in the sectors it
// touches, which its next slots read from the L1), as a short row's per-row work (index
// arithmetic, shuffles) is paid once a warp-wide instruction for all of the warp's rows:
// Swin's 49-wide bf16 softmax rows took a warp each, 2 slots of 64 for 49 elements,
// instruction-bound; 8 threads of 7 keep 4 rows a warp. Ties go to wider chunks, then
// more threads (fewer slots in sequence). Zero lanes when no choice fits registers.
struct WarpRowFit {
  int lanes = 0;
  int threads = 32;
  int64_t chunks = 0;
  int64_t slots = 0;
};

WarpRowFit fit_warp_row(int64_t elems, int64_t last, int max_lanes, int64_t elem_bytes) {
  WarpRowFit best;
  for (int lanes = max_lanes; lanes >= 1; lanes /= 2) {
    if (last % lanes != 0) continue;
    const int64_t chunks = elems / lanes;
    const int64_t bytes = lanes == 1 ? kRowSegmentBytes / 2 : kRowSegmentBytes;
    const int64_t segment = std::min(chunks, (bytes + lanes * elem_bytes - 1) / (lanes * elem_bytes));
    for (int threads = 32; threads >= 1 && threads >= segment; threads /= 2) {
      const int64_t slots = (chunks + threads - 1) / threads;
      if (slots * lanes > kRowTileValues) continue;
      // busy = chunks / (threads * slots), compared without division; ties keep the first.
      if (best.lanes == 0 || chunks * best.threads * best.slots > best.chunks * threads * slots)
        best = {lanes, threads, chunks, slots};
    }
  }
  return best;
}

// Whether a per-element value is worth a register across stages: it reads memory that
// no register holds (a mask, a gathered bias), or calls a transcendental, or takes at
// least 4 operations an element (a LayerNorm's x - mean, one subtraction, is not).
bool worth_keeping(const Expr& e, int v, const RowTile& t) {
  int ops = 0;
  bool reads = false, transcendental = false;
  std::function<void(const Expr&)> walk = [&](const Expr& x) {
    if (!depends_on(x, v)) return;
    if (x->op == ExprOp::Load) {
      const int b = static_cast<int>(x->ival);
      reads |= !t.cached.count(b) && !t.kept.count(b);
      return;
    }
    if (x->op != ExprOp::Cast && !x->args.empty()) ++ops;
    transcendental |= is_transcendental(x->op);
    for (const auto& a : x->args) walk(a);
  };
  walk(e);
  return reads || transcendental || ops >= 4;
}

// The tile's values (RowTile::values): in each tiled stage, the largest per-element
// values (they vary along the row's last dim `v`) that an earlier tiled stage computes
// too, within `take`'s bytes; not in load indices (address arithmetic, which the chunk's
// accesses compute once). Stage 1 of a softmax finds its masked input in stage 0's
// max; stage 2 finds exp(x - max) in stage 1's sum.
void plan_values(const Kernel& k, RowTile& t, int v, const std::function<bool(int64_t)>& take) {
  std::unordered_map<Expr, int, ExprHash, ExprEqual> first;  // subexpression -> the first stage computing it
  std::unordered_set<Expr, ExprHash, ExprEqual> chosen;
  for (size_t st = 0; st < k.stages.size(); ++st) {
    if (!t.tiled[st]) continue;
    const int here = static_cast<int>(st);
    std::unordered_set<const ExprNode*> seen;
    std::function<void(const Expr&)> pick = [&](const Expr& e) {
      if (e->args.empty() || !seen.insert(e.get()).second) return;
      if (e->op != ExprOp::Load && e->op != ExprOp::Cast && depends_on(e, v) && worth_keeping(e, v, t)) {
        if (chosen.count(e)) return;
        auto it = first.find(e);
        const DType dt = e->dtype;
        if (it != first.end() && it->second < here &&
            take(t.slots * t.lanes * (dt == DType::I64 || dt == DType::F64 ? 8 : 4))) {
          chosen.insert(e);
          t.values.push_back({e, it->second});
          return;
        }
      }
      if (e->op != ExprOp::Load)
        for (const auto& a : e->args) pick(a);
    };
    for (const auto& item : k.stages[st].items) pick(item.value);
    seen.clear();
    std::function<void(const Expr&)> note = [&](const Expr& e) {
      if (e->args.empty() || !seen.insert(e.get()).second) return;
      first.emplace(e, here);  // the earliest stays
      if (e->op != ExprOp::Load)
        for (const auto& a : e->args) note(a);
    };
    for (const auto& item : k.stages[st].items) note(item.value);
  }
}

}  // namespace

RowTile plan_row_tile(const Program& p, const Schedule& s, const Placement& m, int ki, CudaLaunch& launch,
                      CudaKernelInfo& info) {
  const Kernel& k = s.kernels[ki];
  if (launch.shape == CudaKernelInfo::Shape::Elementwise) return {};
  const Stage* looping = nullptr;
  // A stage over symbolic dims keeps its per-element loop on the row's threads: the tile
  // must not take threads from it (see below).
  bool symbolic_loop = false;
  for (const auto& st : k.stages) {
    if (st.vector_reduce) return {};
    // A scan is sequential; an arg-reduction needs each element's flat index, which the
    // per-element loop has (j) and the tile's chunks do not.
    for (const auto& item : st.items)
      if (item.is_scan || p.computed[item.computed].is_arg_reduction()) return {};
    // A graph with symbols tiles static rows only (their count may be symbolic); a
    // stage over symbolic dims keeps the per-element loop.
    if (launch.symbolic && is_symbolic(st.inner)) {
      symbolic_loop = true;
      continue;
    }
    if (!st.inner.empty() && (!looping || numel(st.inner) > numel(looping->inner))) looping = &st;
  }
  if (!looping || numel(looping->inner) == 0) return {};
  RowTile t;
  for (const auto& st : k.stages)
    t.tiled.push_back(!st.inner.empty() && !is_symbolic(st.inner) && hints(st.inner) == hints(looping->inner));

  // Each buffer's index where the tiled stages read it from memory (one index, or it
  // is read element by element), and how many stages read it.
  std::map<int, Expr> index;
  std::set<int> mixed, read_untiled;
  std::map<int, int> readers;
  for (size_t st = 0; st < k.stages.size(); ++st) {
    std::set<int> here;
    for (const auto& item : k.stages[st].items)
      walk_loads(item.value, [&](const Expr& e) {
        const int b = static_cast<int>(e->ival);
        if (read_is_local(m.producer[b], s, ki, static_cast<int>(st), VectorResults::InMemory)) return;
        if (!t.tiled[st]) {
          read_untiled.insert(b);
          return;
        }
        auto [it, fresh] = index.emplace(b, e->args[0]);
        if (!fresh && !same_index(it->second, e->args[0])) mixed.insert(b);
        if (here.insert(b).second && !t.first_read.count(b)) t.first_read[b] = static_cast<int>(st);
      });
    for (int b : here) ++readers[b];
  }
  std::map<int, Expr> written;  // per-element values the tiled stages store
  for (size_t st = 0; st < k.stages.size(); ++st)
    for (const auto& item : k.stages[st].items) {
      const int b = p.computed[item.computed].buffer;
      if (t.tiled[st] && !item.is_reduction && m.in_memory[b]) written.emplace(b, item.store_index);
    }
  std::unordered_map<int, int64_t> extents;
  for (size_t d = 0; d < k.outer.size(); ++d) extents[outer_var(static_cast<int>(d))] = k.outer[d].hint();
  for (size_t d = 0; d < looping->inner.size(); ++d) extents[inner_var(static_cast<int>(d))] = looping->inner[d].hint();
  const int v = inner_var(static_cast<int>(looping->inner.size()) - 1);
  // A graph with symbols proves no ranges at the hints: a chunk access there is a store,
  // or a load of a buffer the kernel never reads under a Where branch (see
  // symbolic_vector_index).
  std::set<int> guarded;
  if (launch.symbolic)
    for (const auto& st : k.stages)
      for (const auto& item : st.items)
        walk_guarded_loads(item.value, false, [&](const Expr& e, bool g) {
          if (g) guarded.insert(static_cast<int>(e->ival));
        });
  auto chunk_access = [&](int b, const Expr& e, int lanes) {
    if (vector_bytes(p.buffers[b].dtype, lanes) == 0) return false;
    if (!launch.symbolic) return vector_index(p, e, b, v, lanes, extents);
    return !guarded.count(b) && symbolic_vector_index(e, v, lanes);
  };

  // Lanes: 16 bytes of the widest element a chunk access may move (per-row results,
  // index and mask buffers never are; nor this kernel's values that no memory holds),
  // fewer when the row's last dim asks.
  auto unstored_here = [&](int b) { return m.producer[b].kernel == ki && !m.in_memory[b]; };
  int64_t widest = 1;
  for (const auto& [b, e] : index)
    if (!mixed.count(b) && !unstored_here(b) && chunk_access(b, e, 1))
      widest = std::max(widest, dtype_size(p.buffers[b].dtype));
  for (const auto& [b, e] : written)
    if (chunk_access(b, e, 1)) widest = std::max(widest, dtype_size(p.buffers[b].dtype));
  const int64_t last = looping->inner.back().hint();
  t.lanes = elementwise_elems_per_thread(widest);
  while (t.lanes > 1 && last % t.lanes != 0) t.lanes /= 2;
  int threads = launch.threads;
  // Fewer threads a row suit the tiled stages only. A stage over a symbolic length keeps
  // them all: BLOOM's softmax over the sequence, fused with the 64-wide relayout of its
  // rows' values, took 8 threads a row from the 64-wide stage, 256 elements a thread in
  // each of its 3 passes at 2,048 tokens.
  const WarpRowFit fit = launch.shape == CudaKernelInfo::Shape::RowWarp && !symbolic_loop
                             ? fit_warp_row(numel(looping->inner), last, t.lanes, widest)
                             : WarpRowFit{};
  if (fit.lanes > 0) {
    t.lanes = fit.lanes;
    threads = fit.threads;
  }
  t.chunks = numel(looping->inner) / t.lanes;
  const int64_t slots = (t.chunks + threads - 1) / threads;
  if (slots * t.lanes <= kRowTileValues) t.slots = slots;
  if (t.slots > 0 && launch.shape == CudaKernelInfo::Shape::RowBlock && !symbolic_loop)
    even_row_block(launch, info, t.chunks, slots);
  for (const auto& [b, e] : index)
    if (!mixed.count(b) && chunk_access(b, e, t.lanes)) t.loads[b] = e;
  for (const auto& [b, e] : written)
    if (t.lanes > 1 && chunk_access(b, e, t.lanes)) t.stores.insert(b);

  // Registers, within kRowTileBytes a thread: first the buffers of the row itself
  // that several stages read, then kept values, then broadcast buffers (a LayerNorm's
  // weight; its reads hit the cache anyway).
  if (t.slots > 0) {
    int64_t budget = kRowTileBytes;
    auto take = [&](int64_t bytes) {
      if (bytes > budget) return false;
      budget -= bytes;
      return true;
    };
    auto per_row = [&](const Expr& e) {
      auto af = affine_form(e);
      if (!af) return false;
      for (const auto& [var_id, c] : af->coef)
        if (var_id >= kOuterVarBase && var_id < kInnerVarBase) return true;
      return false;
    };
    auto cache = [&](bool row) {
      for (const auto& [b, e] : t.loads)
        if (readers[b] >= 2 && m.producer[b].kernel != ki && per_row(e) == row &&
            take(t.slots * vector_bytes(p.buffers[b].dtype, t.lanes)))
          t.cached.insert(b);
    };
    cache(true);
    for (size_t st = 0; st < k.stages.size(); ++st)
      for (const auto& item : k.stages[st].items) {
        const int b = p.computed[item.computed].buffer;
        auto it = index.find(b);
        if (!t.tiled[st] || item.is_reduction || it == index.end() || mixed.count(b) || read_untiled.count(b) ||
            !same_index(it->second, item.store_index))
          continue;
        // A register a value: 8 bytes for i64 and f64, 4 for the rest (f16/bf16 kept as f32).
        const DType dt = p.buffers[b].dtype;
        if (take(t.slots * t.lanes * (dt == DType::I64 || dt == DType::F64 ? 8 : 4))) t.kept.insert(b);
      }
    plan_values(k, t, v, take);
    cache(false);
  }
  for (int b : t.kept) {
    t.loads.erase(b);
    if (unstored_here(b)) t.unstored.insert(b);
  }
  for (auto it = t.first_read.begin(); it != t.first_read.end();)
    it = t.cached.count(it->first) ? std::next(it) : t.first_read.erase(it);
  // Scalar accesses and no registers kept: the per-element loop is the same (but for
  // values no memory holds, which only registers do).
  if ((t.loads.empty() && t.stores.empty() && t.unstored.empty() && t.values.empty()) || (t.lanes == 1 && t.slots == 0))
    return {};
  if (t.lanes > 1) {
    for (const auto& [b, e] : t.loads) t.align = std::max(t.align, vector_bytes(p.buffers[b].dtype, t.lanes));
    for (int b : t.stores) t.align = std::max(t.align, vector_bytes(p.buffers[b].dtype, t.lanes));
  }
  if (threads < launch.threads) pack_warp_rows(launch, info, threads);
  info.row_lanes = static_cast<uint32_t>(t.lanes);
  info.row_slots = static_cast<uint32_t>(t.slots);
  info.row_cached.assign(t.cached.begin(), t.cached.end());
  info.row_unstored.assign(t.unstored.begin(), t.unstored.end());
  return t;
}

bool tile_keeps_unstored(const Program& p, const Schedule& s, const Placement& m, int ki, const RowTile& t) {
  const Kernel& k = s.kernels[ki];
  bool kept = true;
  for (size_t st = 0; st < k.stages.size(); ++st)
    for (const auto& item : k.stages[st].items)
      walk_loads(item.value, [&](const Expr& e) {
        const int b = static_cast<int>(e->ival);
        if (m.producer[b].kernel != ki || m.in_memory[b] ||
            read_is_local(m.producer[b], s, ki, static_cast<int>(st), VectorResults::InMemory))
          return;
        kept &= t.kept.count(b) > 0 && st < t.tiled.size() && t.tiled[st];
      });
  return kept;
}

}  // namespace ember
