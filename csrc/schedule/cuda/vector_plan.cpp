#include "schedule/cuda/vector_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
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

}  // namespace ember
