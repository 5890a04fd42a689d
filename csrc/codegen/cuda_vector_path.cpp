#include "codegen/cuda_vector_path.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "codegen/cuda_vector_access.h"
#include "codegen/lane_invariant.h"
#include "ir/affine.h"

namespace ember {

namespace {

// Like vector_index, for a load read only under Where branches, whose index may leave
// the buffer when the branch is not taken: every word starts at a multiple of `lanes`
// and the buffer is whole words, so a word lies all inside the buffer or all outside.
// A lane whose branch is taken reads inside (the guarded-load rule), so its word is
// inside; a word read clamped into the buffer feeds only lanes whose branch is not.
bool guarded_vector_index(const Program& p, const Expr& index, int b, int v, int lanes) {
  return p.buffers[b].extent().hint() % lanes == 0 && symbolic_vector_index(index, v, lanes);
}

std::unordered_map<int, int64_t> var_extents(const Kernel& k, const Stage& stage) {
  std::unordered_map<int, int64_t> extents;
  for (size_t d = 0; d < k.outer.size(); ++d) extents[outer_var(static_cast<int>(d))] = k.outer[d].hint();
  for (size_t d = 0; d < stage.inner.size(); ++d) extents[inner_var(static_cast<int>(d))] = stage.inner[d].hint();
  return extents;
}

// The words whose loads `roots` reach, not looking inside `stop` (values computed elsewhere).
std::set<size_t> words_read(const VectorPlan& vec, const std::vector<Expr>& roots,
                            const std::unordered_set<Expr, ExprHash, ExprEqual>& stop) {
  std::set<size_t> read;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (stop.count(e)) return;
    if (e->op == ExprOp::Load)
      for (size_t w = 0; w < vec.words.size(); ++w)
        for (const auto& l : vec.words[w].loads)
          if (equal(l, e)) read.insert(w);
    for (const auto& a : e->args) walk(a);
  };
  for (const auto& r : roots) walk(r);
  return read;
}

// The value lane `lane` of word `w` gives (f16/bf16 widened), as a local that stands in
// for the word's loads in the current scope.
void bind_word(CudaPrinter& pr, const VectorPlan::Word& w, const std::string& lane) {
  const DType t = pr.p.buffers[w.buffer].dtype;
  const std::string value = lane_value(t, w.name, lane);
  const std::string name = "lane" + w.name.substr(3);
  pr.em->line("const " + CEmitter::c_type(t == DType::F16 || t == DType::BF16 ? DType::F32 : t) + " " + name + " = " + value + ";");
  for (const auto& l : w.loads) pr.em->bind_value(l, name);
}

// `const <vector type> <name> = *(...)(b + index at the group's first lane);`
void load_word(CudaPrinter& pr, const VectorPlan& vec, const VectorPlan::Word& w) {
  CEmitter& em = *pr.em;
  const std::string vt = vector_type(vector_bytes(pr.p.buffers[w.buffer].dtype, vec.lanes));
  std::string idx = em.emit(substitute(w.index, {{vec.v, var(kFirstLaneVar)}}));
  if (w.clamp) idx = "ember_clamp_index(" + idx + ", " + std::to_string(pr.p.buffers[w.buffer].extent().hint() - vec.lanes) + "LL)";
  em.line("const " + vt + " " + w.name + " = *(const " + vt + "*)(b" + std::to_string(w.buffer) + " + " + idx + ");");
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
  for (size_t w : vec.kept) load_word(pr, vec, vec.words[w]);
  std::set<size_t> needed = words_read(vec, vec.hoisted, {});
  for (size_t k = 0; k < vec.hoisted.size(); ++k)
    em.line(CEmitter::c_type(vec.hoisted[k]->dtype) + " h" + std::to_string(k) + "[" + U + "];");
  em.open_scope({});
  for (size_t w : needed)
    if (!vec.kept.count(w)) load_word(pr, vec, vec.words[w]);
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

VectorPlan plan_vector(const Program& p, const Schedule& s, const Placement& m, int ki, const CudaLaunch& launch) {
  const Kernel& k = s.kernels[ki];
  if (launch.shape != CudaKernelInfo::Shape::Elementwise) return {};
  const Stage& stage = k.stages[0];
  if (k.stages.size() != 1 || stage.inner.empty() || launch.per_thread <= 1) return {};
  // A graph with symbols: the stage's own dims static (symbolic rows are fine), and no
  // range proofs at the hints (symbolic_vector_index says what holds instead).
  if (launch.symbolic && is_symbolic(stage.inner)) return {};
  VectorPlan plan;
  plan.lanes = launch.per_thread;
  plan.v = inner_var(static_cast<int>(stage.inner.size()) - 1);
  plan.extent = stage.inner.back().hint();
  if (plan.extent % plan.lanes != 0) return {};
  const auto extents = var_extents(k, stage);
  // Loads, grouped by buffer and index: one word per index that is vector-addressable
  // on its own (max-pool's nine window loads of one buffer are nine words).
  std::vector<VectorPlan::Word> found;
  std::vector<bool> unguarded;
  for (const auto& item : stage.items)
    walk_guarded_loads(item.value, false, [&](const Expr& e, bool guarded) {
      const int b = static_cast<int>(e->ival);
      size_t w = 0;
      while (w < found.size() && !(found[w].buffer == b && same_index(found[w].index, e->args[0]))) ++w;
      if (w == found.size()) {
        found.push_back({b, e->args[0], {}, "", false, false});
        unguarded.push_back(false);
      }
      unguarded[w] = unguarded[w] || !guarded;
      auto& loads = found[w].loads;
      if (std::none_of(loads.begin(), loads.end(), [&](const Expr& l) { return equal(l, e); })) loads.push_back(e);
    });
  std::map<int, int> per_buffer;
  for (size_t w = 0; w < found.size(); ++w) {
    VectorPlan::Word& word = found[w];
    const int b = word.buffer;
    if (m.producer[b].kernel == ki || vector_bytes(p.buffers[b].dtype, plan.lanes) == 0) continue;
    if (launch.symbolic) {
      if (!unguarded[w] || !symbolic_vector_index(word.index, plan.v, plan.lanes)) continue;
    } else if (!vector_index(p, word.index, b, plan.v, plan.lanes, extents)) {
      if (unguarded[w] || !guarded_vector_index(p, word.index, b, plan.v, plan.lanes)) continue;
      word.clamp = true;
    }
    const int n = per_buffer[b]++;
    word.name = "raw" + std::to_string(b) + (n ? "_" + std::to_string(n) : "");
    word.invariant = depends_only_on(word.index, plan.v);
    plan.words.push_back(std::move(word));
  }
  for (const auto& item : stage.items) {
    int b = p.computed[item.computed].buffer;
    if (m.in_memory[b] && vector_bytes(p.buffers[b].dtype, plan.lanes) > 0 &&
        (launch.symbolic ? symbolic_vector_index(item.store_index, plan.v, plan.lanes)
                         : vector_index(p, item.store_index, b, plan.v, plan.lanes, extents)))
      plan.stores.insert(b);
  }
  if (plan.words.empty() && plan.stores.empty()) return {};
  for (size_t w = 0; w < plan.words.size(); ++w) plan.loop_words.insert(w);
  return plan;
}

void plan_hoist(VectorPlan& vec, const Program& p, const Schedule& s, const Placement& m, int ki, CudaKernelInfo& info) {
  // kHoistBlocks is counted in blocks of kElementwiseBlock threads: the same threads in
  // blocks of another size (a max-autotune variant).
  const int64_t min_blocks = std::max<int64_t>(1, kHoistBlocks * kElementwiseBlock / info.block);
  if (vec.lanes == 0 || info.grid <= min_blocks) return;
  const int64_t step = int64_t{info.block} * vec.lanes;
  const int64_t multiple = vec.extent / std::gcd(vec.extent, step);
  int64_t grid = std::max<int64_t>(min_blocks, (info.grid + kHoistSteps - 1) / kHoistSteps);
  if (multiple * 8 > grid) return;  // rounding up would add more than an eighth
  grid = (grid + multiple - 1) / multiple * multiple;

  std::vector<Expr> roots;
  for (const auto& item : s.kernels[ki].stages[0].items) roots.push_back(item.value);
  auto readable = [&](int b) { return m.producer[b].kernel != ki; };
  int64_t budget = kHoistWords;
  std::unordered_set<Expr, ExprHash, ExprEqual> hoisted;
  for (const InvariantValue& c : innermost_invariants(roots, vec.v, readable)) {
    const int64_t words = vec.lanes * (dtype_size(c.value->dtype) > 4 ? 2 : 1);
    if (words > budget) continue;
    budget -= words;
    vec.hoisted.push_back(c.value);
    hoisted.insert(c.value);
  }
  if (vec.hoisted.empty()) return;
  vec.loop_words = words_read(vec, roots, hoisted);
  int64_t kept_words = 0;
  for (size_t w : vec.loop_words) {
    const int64_t words = vector_bytes(p.buffers[vec.words[w].buffer].dtype, vec.lanes) / 4;
    if (!vec.words[w].invariant || words > budget) continue;
    budget -= words;
    kept_words += words;
    vec.kept.insert(w);
  }
  vec.hoisted_registers = kHoistWords - budget;
  info.grid = static_cast<uint32_t>(grid);
  info.grid_multiple = static_cast<uint32_t>(multiple);
  info.hoisted_values = static_cast<uint32_t>(vec.hoisted.size());
  info.hoisted_words = static_cast<uint32_t>(kept_words);
}

int hoist_min_blocks(const VectorPlan& vec, uint32_t block) {
  if (vec.hoisted_registers <= kHoistMinBlocksAbove) return 0;
  return std::max<int>(1, kHoistMinBlocks * kElementwiseBlock / static_cast<int>(block));
}

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
