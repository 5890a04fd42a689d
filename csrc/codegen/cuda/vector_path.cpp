#include "codegen/cuda/vector_path.h"

#include <map>
#include <set>

#include "codegen/cuda/vector_access.h"

namespace ember {

namespace {

// The value lane `lane` of word `w` gives (f16/bf16 widened), as a local that stands in
// for the word's loads in the current scope.
void bind_word(CudaPrinter& pr, const VectorPlan::Word& w, const std::string& lane) {
  const DType t = pr.p.buffers[w.buffer].dtype;
  const std::string value = lane_value(t, w.name, lane);
  const std::string name = "lane" + w.name.substr(3);
  pr.em->line("const " + CEmitter::c_type(t == DType::F16 || t == DType::BF16 ? DType::F32 : t) + " " + name + " = " + value + ";");
  for (const auto& l : w.loads) pr.em->bind_value(l, name);
}

// `const <vector type> <name> = *(...)(b + index at the group's first lane);`, or with
// `tested` and the word's `needed` tests, the load only when some lane reads it (zeros,
// which no lane uses, otherwise).
void load_word(CudaPrinter& pr, const VectorPlan& vec, const VectorPlan::Word& w, bool tested = true) {
  CEmitter& em = *pr.em;
  const std::string vt = vector_type(vector_bytes(pr.p.buffers[w.buffer].dtype, vec.lanes));
  std::string idx = em.emit(substitute(w.index, {{vec.v, var(kFirstLaneVar)}}));
  if (w.clamp) idx = "ember_clamp_index(" + idx + ", " + std::to_string(pr.p.buffers[w.buffer].extent().hint() - vec.lanes) + "LL)";
  const std::string word = "*(const " + vt + "*)(b" + std::to_string(w.buffer) + " + " + idx + ")";
  if (!tested || w.needed.empty()) {
    em.line("const " + vt + " " + w.name + " = " + word + ";");
    return;
  }
  std::string any;
  for (const auto& tests : w.needed) {
    std::string all;
    for (const auto& t : tests) {
      const Expr lane = t.last ? add(var(kFirstLaneVar), int_const(vec.lanes - 1)) : var(kFirstLaneVar);
      all += (all.empty() ? "" : " && ") + em.emit(substitute(t.cond, {{vec.v, lane}}));
    }
    any += (any.empty() ? "(" : " || (") + all + ")";
  }
  em.line("const " + vt + " " + w.name + " = " + any + " ? " + word + " : " + vt + "{};  /* only if a lane's branch reads it */");
}

// plan_hoist's values, before the grid-stride loop: the thread's innermost coordinate
// `hv` (the same in every step), the kept words, and h<k>[u] for each lane u.
std::vector<std::string> hoisted_values(CudaPrinter& pr, const VectorPlan& vec) {
  CEmitter& em = *pr.em;
  const std::string I = pr.index_type(), U = std::to_string(vec.lanes);
  std::vector<std::string> out;
  out.push_back("const " + I + " g0 = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x;");
  out.push_back("const int64_t hv = (int64_t)(g0 * " + U + " % " + std::to_string(vec.extent) + ");");
  em.open_scope({{kFirstLaneVar, "hv"}});
  for (size_t w : vec.kept) load_word(pr, vec, vec.words[w], false);
  std::set<size_t> needed = words_read(vec, vec.hoisted, {});
  for (size_t k = 0; k < vec.hoisted.size(); ++k)
    em.line(CEmitter::c_type(vec.hoisted[k]->dtype) + " h" + std::to_string(k) + "[" + U + "];");
  em.open_scope({});
  for (size_t w : needed)
    if (!vec.kept.count(w)) load_word(pr, vec, vec.words[w], false);
  em.open_scope({{vec.v, "(hv + u)"}});
  for (size_t w : needed) bind_word(pr, vec.words[w], "u");
  for (size_t k = 0; k < vec.hoisted.size(); ++k) em.line("h" + std::to_string(k) + "[u] = " + em.emit(vec.hoisted[k]) + ";");
  std::vector<std::string> lanes = em.close_scope();
  std::vector<std::string> block = em.close_scope();
  em.line("{");
  for (const auto& l : block) em.line("  " + l);
  em.line("  #pragma unroll");
  em.line("  for (int u = 0; u < " + U + "; ++u) {");
  for (const auto& l : lanes) em.line("    " + l);
  em.line("  }");
  em.line("}");
  for (const auto& l : em.close_scope()) out.push_back(l);
  return out;
}

}  // namespace

std::vector<std::string> elementwise_vector_body(CudaPrinter& pr, const VectorPlan& vec) {
  if (vec.lanes == 0) return {};
  const Program& p = pr.p;
  const Stage& stage = pr.k.stages[0];
  const int U = vec.lanes;
  const std::string I = pr.index_type();
  std::vector<std::string> before;
  if (!vec.hoisted.empty()) before = hoisted_values(pr, vec);

  CEmitter& em = *pr.em;
  std::vector<std::pair<int, std::string>> group_vars = pr.outer_vars();
  for (size_t d = 0; d + 1 < stage.inner.size(); ++d) group_vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
  group_vars.push_back({kFirstLaneVar, "iv"});
  // Sizes first: a symbolic one is a function-scope value.
  const std::string groups = pr.launch.symbolic ? "(" + pr.size_text(pr.launch.total_dim) + ") / " + std::to_string(U)
                                                : std::to_string(pr.launch.total / U);
  em.open_scope(group_vars);
  for (const auto& l : pr.decompose_dims("x", pr.k.outer, "o")) em.line(l);
  std::vector<std::string> coords = decompose("j", hints(stage.inner), "i");
  coords.back() = "const int64_t iv" + coords.back().substr(coords.back().find(" = "));
  for (const auto& l : coords) em.line(l);
  for (size_t w : vec.loop_words)
    if (!vec.kept.count(w)) load_word(pr, vec, vec.words[w]);
  std::map<int, std::string> store_at;
  for (const auto& item : stage.items) {
    int b = p.computed[item.computed].buffer;
    if (!vec.stores.count(b) || store_at.count(b)) continue;
    store_at[b] = em.emit(substitute(item.store_index, {{vec.v, var(kFirstLaneVar)}}));
    em.line(vector_type(vector_bytes(p.buffers[b].dtype, U)) + " out" + std::to_string(b) + ";");
  }
  em.open_scope({{vec.v, "(iv + u)"}});
  for (size_t w : vec.loop_words) bind_word(pr, vec.words[w], "u");
  for (size_t k = 0; k < vec.hoisted.size(); ++k) em.bind_value(vec.hoisted[k], "h" + std::to_string(k) + "[u]");
  for (const auto& item : stage.items) {
    const ComputedBuffer& c = p.computed[item.computed];
    std::string val = em.emit(item.value);
    const DType t = p.buffers[c.buffer].dtype;
    if (vec.stores.count(c.buffer))
      em.line(CEmitter::store_text("(" + lane_pointer(t, false) + "&out" + std::to_string(c.buffer) + ")", "u", t, val));
    else if (pr.m.in_memory[c.buffer])
      em.line(CEmitter::store_text(em.buffer_name(c.buffer), em.emit(item.store_index), t, val));
    em.bind_local(c.buffer, val, em.depth());
  }
  std::vector<std::string> lanes = em.close_scope();
  em.line("#pragma unroll");
  em.line("for (int u = 0; u < " + std::to_string(U) + "; ++u) {");
  for (const auto& l : lanes) em.line("  " + l);
  em.line("}");
  for (const auto& [b, idx] : store_at) {
    const std::string vt = vector_type(vector_bytes(p.buffers[b].dtype, U));
    em.line("*(" + vt + "*)(b" + std::to_string(b) + " + " + idx + ") = out" + std::to_string(b) + ";");
  }
  std::vector<std::string> group = em.close_scope();

  std::string aligned;
  std::set<int> pointers;
  for (const auto& w : vec.words) pointers.insert(w.buffer);
  for (const auto& [b, idx] : store_at) pointers.insert(b);
  for (int b : pointers) aligned += std::string(aligned.empty() ? "" : " | ") + "(uintptr_t)b" + std::to_string(b);
  std::string condition = "((" + aligned + ") & 15) == 0";
  std::string why = "every vector pointer 16-byte aligned";
  if (!vec.hoisted.empty()) {
    // Hoisting holds only on the grid plan_hoist chose: the launch could differ.
    condition += " && ((" + I + ")gridDim.x * blockDim.x * " + std::to_string(U) + ") % " + std::to_string(vec.extent) + " == 0";
    why += ", the grid-stride step a multiple of " + std::to_string(vec.extent);
  }
  const int64_t inner = numel(stage.inner);  // static (plan_vector)
  std::vector<std::string> out;
  out.push_back("if (" + condition + ") {  /* vector path: " + why + " */");
  for (const auto& l : before) out.push_back("  " + l);
  out.push_back("  for (" + I + " g = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x; g < " + groups + "; g += (" + I +
                ")gridDim.x * blockDim.x) {");
  out.push_back("    const " + I + " x = g * " + std::to_string(U) + " / " + std::to_string(inner) + ";");
  out.push_back("    const " + I + " j = g * " + std::to_string(U) + " - x * " + std::to_string(inner) + ";");
  for (const auto& l : group) out.push_back("    " + l);
  out.push_back("  }");
  out.push_back("  return;");
  out.push_back("}");
  return out;
}

}  // namespace ember
