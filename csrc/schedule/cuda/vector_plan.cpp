#include "schedule/cuda/vector_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "ir/affine.h"
#include "schedule/cuda/lane_invariant.h"
#include "schedule/cuda/vector_access.h"

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

// A branch condition as a test on a group of lanes that holds when it holds for some
// lane: cmp(a, b) over integers with a - b linear in v is monotone along the group, so
// a test that holds for small a - b holds for some lane iff it holds for the lane with
// the smallest a - b (the first when a - b grows with v), and the other way round.
std::optional<VectorPlan::LaneTest> lane_test(const Expr& cond, bool taken, int v) {
  static const std::map<ExprOp, ExprOp> negated = {
      {ExprOp::Lt, ExprOp::Ge}, {ExprOp::Le, ExprOp::Gt}, {ExprOp::Gt, ExprOp::Le}, {ExprOp::Ge, ExprOp::Lt}};
  auto it = negated.find(cond->op);
  if (it == negated.end()) return std::nullopt;
  const Expr& a = cond->args[0];
  const Expr& b = cond->args[1];
  if (!is_int(a->dtype) || !is_int(b->dtype)) return std::nullopt;
  auto c = coefficient(binary(ExprOp::Sub, a, b, DType::I64), v);
  if (!c) return std::nullopt;
  const ExprOp op = taken ? cond->op : it->second;
  const bool below = op == ExprOp::Lt || op == ExprOp::Le;
  return VectorPlan::LaneTest{taken ? cond : binary(op, a, b, DType::Bool), *c != 0 && below == (*c < 0)};
}

using Path = std::vector<std::pair<Expr, bool>>;  // enclosing Where conditions, taken or not

void walk_branch_loads(const Expr& e, Path& path, const std::function<void(const Expr&, const Path&)>& f) {
  if (e->op == ExprOp::Load) f(e, path);
  if (e->op != ExprOp::Where) {
    for (const auto& a : e->args) walk_branch_loads(a, path, f);
    return;
  }
  walk_branch_loads(e->args[0], path, f);
  for (int i = 1; i <= 2; ++i) {
    path.push_back({e->args[0], i == 1});
    walk_branch_loads(e->args[i], path, f);
    path.pop_back();
  }
}

constexpr size_t kMaxAlternatives = 4;  // branches a word is read under, each tested

std::unordered_map<int, int64_t> var_extents(const Kernel& k, const Stage& stage) {
  std::unordered_map<int, int64_t> extents;
  for (size_t d = 0; d < k.outer.size(); ++d) extents[outer_var(static_cast<int>(d))] = k.outer[d].hint();
  for (size_t d = 0; d < stage.inner.size(); ++d) extents[inner_var(static_cast<int>(d))] = stage.inner[d].hint();
  return extents;
}

}  // namespace

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
  std::vector<bool> unguarded, always;  // read outside every branch; read where no test tells
  Path path;
  for (const auto& item : stage.items)
    walk_branch_loads(item.value, path, [&](const Expr& e, const Path& branches) {
      const int b = static_cast<int>(e->ival);
      size_t w = 0;
      while (w < found.size() && !(found[w].buffer == b && same_index(found[w].index, e->args[0]))) ++w;
      if (w == found.size()) {
        found.push_back({b, e->args[0], {}, "", false, false, {}});
        unguarded.push_back(false);
        always.push_back(false);
      }
      unguarded[w] = unguarded[w] || branches.empty();
      std::vector<VectorPlan::LaneTest> tests;
      for (const auto& [cond, taken] : branches)
        if (auto t = lane_test(cond, taken, plan.v)) tests.push_back(*t);
      auto same = [&](const std::vector<VectorPlan::LaneTest>& other) {
        return other.size() == tests.size() && std::equal(tests.begin(), tests.end(), other.begin(), [](const auto& x, const auto& y) {
                 return x.last == y.last && equal(x.cond, y.cond);
               });
      };
      auto& needed = found[w].needed;
      if (tests.empty() || (needed.size() >= kMaxAlternatives && std::none_of(needed.begin(), needed.end(), same)))
        always[w] = true;
      else if (std::none_of(needed.begin(), needed.end(), same))
        needed.push_back(std::move(tests));
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
    if (always[w] || launch.symbolic) word.needed.clear();
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

}  // namespace ember
