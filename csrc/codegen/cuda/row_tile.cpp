#include "codegen/cuda/row_tile.h"

#include <map>
#include <string>
#include <unordered_map>

#include "codegen/cuda/reduction.h"
#include "codegen/cuda/row.h"
#include "codegen/cuda/vector_access.h"

namespace ember {

namespace {

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

void declare_tile_registers(CudaPrinter& pr, const RowTile& tile, ChunkAccess access) {
  const std::string slots = std::to_string(tile.slots);
  for (int b : tile.cached)
    if (access == ChunkAccess::Vector)
      pr.em->line(chunk_type(pr.p.buffers[b].dtype, tile.lanes) + " row" + std::to_string(b) + "[" + slots + "];");
  for (int b : tile.kept)
    pr.em->line(CEmitter::c_type(pr.p.buffers[b].dtype) + " kept" + std::to_string(b) + "[" +
                std::to_string(tile.slots * tile.lanes) + "];");
  for (size_t k = 0; k < tile.values.size(); ++k)
    pr.em->line(CEmitter::c_type(tile.values[k].value->dtype) + " value" + std::to_string(k) + "[" +
                std::to_string(tile.slots * tile.lanes) + "];");
}

bool print_tile_stage(CudaPrinter& pr, const RowTile& tile, int st, ChunkAccess access) {
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
    if (c.is_reduction) accs[i] = declare_thread_acc(em, c, per_thread);
  }
  const int v = inner_var(static_cast<int>(stage.inner.size()) - 1);
  std::vector<std::pair<int, std::string>> chunk_vars;
  for (size_t d = 0; d + 1 < stage.inner.size(); ++d) chunk_vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
  chunk_vars.push_back({kFirstLaneVar, "iv"});
  em.open_scope(chunk_vars);
  std::vector<std::string> coords = decompose(L == 1 ? "c" : "c * " + std::to_string(L), hints(stage.inner), "i");
  coords.back() = "const int64_t iv" + coords.back().substr(coords.back().find(" = "));
  for (const auto& l : coords) em.line(l);

  // What this stage reads from memory a word at a time, and the words its lanes come
  // from (element by element, the lanes' loads print as any load does).
  const bool words = access == ChunkAccess::Vector;
  std::set<int> read, kept_read;
  for (const auto& item : stage.items)
    walk_loads(item.value, [&](const Expr& e) {
      const int b = static_cast<int>(e->ival);
      if (read_is_local(pr.m.producer[b], pr.s, pr.ki, st, VectorResults::InMemory)) return;
      if (words && tile.loads.count(b)) read.insert(b);
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
    if (!words || !tile.stores.count(b) || item.is_reduction || store_at.count(b)) continue;
    store_at[b] = em.emit(substitute(item.store_index, at_first));
    em.line(chunk_type(p.buffers[b].dtype, L) + " out" + std::to_string(b) + ";");
  }

  const std::string lane = L == 1 ? "" : "l";
  const std::string kept_at = L == 1 ? "[u]" : "[u * " + std::to_string(L) + " + l]";
  em.open_scope({{v, L == 1 ? "iv" : "(iv + l)"}});
  for (int b : read) bind_lane(pr, b, word[b], lane);
  for (int b : kept_read) em.bind_local(b, "kept" + std::to_string(b) + kept_at, em.depth());
  // Values an earlier stage computed stand in for computing them again.
  for (size_t k = 0; k < tile.values.size(); ++k)
    if (tile.values[k].stage < st) em.bind_value(tile.values[k].value, "value" + std::to_string(k) + kept_at);
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
  for (size_t k = 0; k < tile.values.size(); ++k)
    if (tile.values[k].stage == st) em.line("value" + std::to_string(k) + kept_at + " = " + em.emit(tile.values[k].value) + ";");
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
