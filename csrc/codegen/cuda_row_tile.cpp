#include "codegen/cuda_row_tile.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>

#include "codegen/cuda_reduction.h"
#include "codegen/cuda_row.h"
#include "codegen/cuda_vector_access.h"
#include "ir/affine.h"

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

// The C type of a row tile chunk of `lanes` elements of `t`: a vector word, or one element.
std::string chunk_type(DType t, int lanes) {
  return lanes == 1 ? dtype_c_type(t) : vector_type(vector_bytes(t, lanes));
}

// Lane `lane` of the vector word `word` of buffer b (the word itself, an element, when
// `lane` is empty), as a local that stands in for the loads of b in the current scope
// (the value such a load gives: f16/bf16 widened).
void bind_lane(CudaPrinter& pr, int b, const std::string& word, const std::string& lane) {
  const DType t = pr.p.buffers[b].dtype;
  std::string value = lane.empty() ? word : "(" + lane_pointer(t, true) + "&" + word + ")[" + lane + "]";
  if (t == DType::F16) value = "ember_h2f(" + value + ")";
  if (t == DType::BF16) value = "ember_bf2f(" + value + ")";
  const std::string name = "lane" + std::to_string(b);
  pr.em->line("const " + CEmitter::c_type(t == DType::F16 || t == DType::BF16 ? DType::F32 : t) + " " + name + " = " + value + ";");
  pr.em->bind_local(b, name, pr.em->depth());
}

}  // namespace

RowTile plan_row_tile(const Program& p, const Schedule& s, const Placement& m, int ki, CudaLaunch& launch,
                      CudaKernelInfo& info) {
  const Kernel& k = s.kernels[ki];
  if (launch.shape == CudaKernelInfo::Shape::Elementwise) return {};
  const Stage* looping = nullptr;
  for (const auto& st : k.stages) {
    if (st.vector_reduce) return {};
    // A scan is sequential; an arg-reduction needs each element's flat index, which the
    // per-element loop has (j) and the tile's chunks do not.
    for (const auto& item : st.items)
      if (item.is_scan || p.computed[item.computed].is_arg_reduction()) return {};
    // A graph with symbols tiles static rows only (their count may be symbolic); a
    // stage over symbolic dims keeps the per-element loop.
    if (launch.symbolic && is_symbolic(st.inner)) continue;
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
  // index and mask buffers never are), fewer when the row's last dim asks.
  int64_t widest = 1;
  for (const auto& [b, e] : index)
    if (!mixed.count(b) && chunk_access(b, e, 1)) widest = std::max(widest, dtype_size(p.buffers[b].dtype));
  for (const auto& [b, e] : written)
    if (chunk_access(b, e, 1)) widest = std::max(widest, dtype_size(p.buffers[b].dtype));
  t.lanes = elementwise_elems_per_thread(widest);
  while (t.lanes > 1 && looping->inner.back().hint() % t.lanes != 0) t.lanes /= 2;
  t.chunks = numel(looping->inner) / t.lanes;
  const int64_t slots = (t.chunks + launch.threads - 1) / launch.threads;
  if (slots * t.lanes <= kRowTileValues) t.slots = slots;
  if (t.slots > 0 && launch.shape == CudaKernelInfo::Shape::RowBlock) even_row_block(launch, info, t.chunks, slots);
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
        const std::string type = CEmitter::c_type(p.buffers[b].dtype);
        if (take(t.slots * t.lanes * (type == "int64_t" || type == "double" ? 8 : 4))) t.kept.insert(b);
      }
    cache(false);
  }
  for (int b : t.kept) t.loads.erase(b);
  for (auto it = t.first_read.begin(); it != t.first_read.end();)
    it = t.cached.count(it->first) ? std::next(it) : t.first_read.erase(it);
  // Scalar accesses and no registers kept: the per-element loop is the same.
  if ((t.loads.empty() && t.stores.empty()) || (t.lanes == 1 && t.slots == 0)) return {};
  if (t.lanes > 1) {
    for (const auto& [b, e] : t.loads) t.align = std::max(t.align, vector_bytes(p.buffers[b].dtype, t.lanes));
    for (int b : t.stores) t.align = std::max(t.align, vector_bytes(p.buffers[b].dtype, t.lanes));
  }
  info.row_lanes = static_cast<uint32_t>(t.lanes);
  info.row_slots = static_cast<uint32_t>(t.slots);
  info.row_cached.assign(t.cached.begin(), t.cached.end());
  return t;
}

void declare_tile_registers(CudaPrinter& pr, const RowTile& tile) {
  const std::string slots = std::to_string(tile.slots);
  for (int b : tile.cached)
    pr.em->line(chunk_type(pr.p.buffers[b].dtype, tile.lanes) + " row" + std::to_string(b) + "[" + slots + "];");
  for (int b : tile.kept)
    pr.em->line(CEmitter::c_type(pr.p.buffers[b].dtype) + " kept" + std::to_string(b) + "[" +
                std::to_string(tile.slots * tile.lanes) + "];");
}

bool print_tile_stage(CudaPrinter& pr, const RowTile& tile, int st) {
  const Program& p = pr.p;
  CEmitter& em = *pr.em;
  const Stage& stage = pr.k.stages[st];
  const int row_level = em.depth();
  const int L = tile.lanes;
  const std::string I = pr.index_type();
  const bool unrolled = tile.slots > 0;
  const int64_t per_thread = L * (unrolled ? tile.slots : (tile.chunks + pr.launch.threads - 1) / pr.launch.threads);
  std::vector<Acc> accs(stage.items.size());
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const ComputedBuffer& c = p.computed[stage.items[i].computed];
    if (c.is_reduction) accs[i] = declare_acc(em, c, per_thread);
  }
  const int v = inner_var(static_cast<int>(stage.inner.size()) - 1);
  std::vector<std::pair<int, std::string>> chunk_vars;
  for (size_t d = 0; d + 1 < stage.inner.size(); ++d) chunk_vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
  chunk_vars.push_back({kFirstLaneVar, "iv"});
  em.open_scope(chunk_vars);
  std::vector<std::string> coords = decompose(L == 1 ? "c" : "c * " + std::to_string(L), hints(stage.inner), "i");
  coords.back() = "const int64_t iv" + coords.back().substr(coords.back().find(" = "));
  for (const auto& l : coords) em.line(l);

  // What this stage reads from memory, and the words its lanes come from.
  std::set<int> read, kept_read;
  for (const auto& item : stage.items)
    walk_loads(item.value, [&](const Expr& e) {
      const int b = static_cast<int>(e->ival);
      if (read_is_local(pr.m.producer[b], pr.s, pr.ki, st, VectorResults::InMemory)) return;
      if (tile.loads.count(b)) read.insert(b);
      if (tile.kept.count(b)) kept_read.insert(b);
    });
  const std::unordered_map<int, Expr> at_first = {{v, var(kFirstLaneVar)}};
  std::map<int, std::string> word;
  for (int b : read) {
    const bool cached = tile.cached.count(b) > 0;
    word[b] = (cached ? "row" : "raw") + std::to_string(b) + (cached ? "[u]" : "");
    if (cached && tile.first_read.at(b) != st) continue;  // in registers already
    const std::string vt = chunk_type(p.buffers[b].dtype, L);
    const std::string load = "*(const " + vt + "*)(b" + std::to_string(b) + " + " + em.emit(substitute(tile.loads.at(b), at_first)) + ")";
    em.line((cached ? "" : "const " + vt + " ") + word[b] + " = " + load + ";");
  }
  std::map<int, std::string> store_at;
  for (const auto& item : stage.items) {
    const int b = p.computed[item.computed].buffer;
    if (!tile.stores.count(b) || item.is_reduction || store_at.count(b)) continue;
    store_at[b] = em.emit(substitute(item.store_index, at_first));
    em.line(chunk_type(p.buffers[b].dtype, L) + " out" + std::to_string(b) + ";");
  }

  const std::string lane = L == 1 ? "" : "l";
  const std::string kept_at = L == 1 ? "[u]" : "[u * " + std::to_string(L) + " + l]";
  em.open_scope({{v, L == 1 ? "iv" : "(iv + l)"}});
  for (int b : read) bind_lane(pr, b, word[b], lane);
  for (int b : kept_read) em.bind_local(b, "kept" + std::to_string(b) + kept_at, em.depth());
  bool stored = false;
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const KernelItem& item = stage.items[i];
    const ComputedBuffer& c = p.computed[item.computed];
    const std::string val = em.emit(item.value);
    if (c.is_reduction) {
      accumulate(em, c, accs[i], val);
      continue;
    }
    const DType t = p.buffers[c.buffer].dtype;
    if (store_at.count(c.buffer))
      em.line(CEmitter::store_text("(" + lane_pointer(t, false) + "&out" + std::to_string(c.buffer) + ")", lane, t, val));
    else if (pr.m.in_memory[c.buffer])
      em.line(CEmitter::store_text(em.buffer_name(c.buffer), em.emit(item.store_index), t, val));
    stored |= pr.m.in_memory[c.buffer];
    if (tile.kept.count(c.buffer)) em.line("kept" + std::to_string(c.buffer) + kept_at + " = " + val + ";");
    em.bind_local(c.buffer, val, em.depth());
  }
  std::vector<std::string> lanes = em.close_scope();
  if (L == 1) {
    for (const auto& l : lanes) em.line(l);
  } else {
    em.line("#pragma unroll");
    em.line("for (int l = 0; l < " + std::to_string(L) + "; ++l) {");
    for (const auto& l : lanes) em.line("  " + l);
    em.line("}");
  }
  for (const auto& [b, idx] : store_at) {
    const std::string vt = chunk_type(p.buffers[b].dtype, L);
    em.line("*(" + vt + "*)(b" + std::to_string(b) + " + " + idx + ") = out" + std::to_string(b) + ";");
  }
  std::vector<std::string> body = em.close_scope();

  const std::string chunks = std::to_string(tile.chunks), threads = std::to_string(pr.launch.threads);
  if (unrolled) {
    // Slot u is the same chunk in every stage: its registers stay with this thread.
    const std::string last = std::to_string(tile.slots - 1);
    const bool ragged = tile.chunks % pr.launch.threads != 0;
    em.line("#pragma unroll");
    em.line("for (int u = 0; u < " + std::to_string(tile.slots) + "; ++u) {");
    em.line("  const " + I + " c = u * " + threads + " + tid;");
    if (ragged) em.line("  if (u < " + last + " || c < " + chunks + ") {  /* the last slot: chunks past the row's end */");
    for (const auto& l : body) em.line((ragged ? "    " : "  ") + l);
    if (ragged) em.line("  }");
    em.line("}");
  } else {
    em.line("#pragma unroll 4");
    em.line("for (" + I + " c = tid; c < " + chunks + "; c += " + threads + ") {");
    for (const auto& l : body) em.line("  " + l);
    em.line("}");
  }
  return finish_row_reductions(pr, stage, accs, row_level) || stored;
}

}  // namespace ember
