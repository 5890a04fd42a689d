#include "schedule/merge_dims.h"

#include <functional>

#include "ir/symbolic_affine.h"

namespace ember {

namespace {

// Whether inner dims k and k+1 of `stage` can be merged. Sizes and strides may be
// symbolic (a view of an input whose sizes are symbols): the test is on their canonical
// forms, so a graph with symbols loops, and sums, in the same order as the static one
// (fuzz seed 80280: a [13,16] layer_norm summed row by row under --dynamic).
bool mergeable(const Stage& stage, int k) {
  const int a = inner_var(k), b = inner_var(k + 1);
  const Dim size_b = stage.inner[k + 1];
  auto index_ok = [&](const Expr& index) { return index_merges(index, a, b, size_b); };
  for (const auto& item : stage.items) {
    if (!vars_only_in_indices(item.value, a, b, index_ok)) return false;
    if (!item.is_reduction ? !index_ok(item.store_index)
                           : depends_on(item.store_index, a) || depends_on(item.store_index, b))
      return false;
  }
  return true;
}

// Rewrites vars after merging dims k and k+1: a := 0, b := merged, later dims shift down.
void apply_merge(Stage& stage, int k) {
  std::unordered_map<int, Expr> sub;
  sub[inner_var(k)] = int_const(0);
  sub[inner_var(k + 1)] = var(inner_var(k));
  for (size_t d = k + 2; d < stage.inner.size(); ++d) sub[inner_var(static_cast<int>(d))] = var(inner_var(static_cast<int>(d) - 1));
  for (auto& item : stage.items) {
    item.value = substitute(item.value, sub);
    item.store_index = substitute(item.store_index, sub);
  }
  stage.inner[k] *= stage.inner[k + 1];
  stage.inner.erase(stage.inner.begin() + k + 1);
}

}  // namespace

bool index_merges(const Expr& index, int a, int b, const Dim& size_b) {
  auto f = symbolic_affine_form(index);
  if (!f) return !depends_on(index, a) && !depends_on(index, b);
  const Dim zero = int64_t{0};
  const Dim ca = f->coef.count(a) ? f->coef.at(a) : zero;
  const Dim cb = f->coef.count(b) ? f->coef.at(b) : zero;
  return ca == cb * size_b;
}

bool vars_only_in_indices(const Expr& value, int a, int b, const std::function<bool(const Expr&)>& index_ok) {
  bool ok = true;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!ok) return;
    if (e->op == ExprOp::Var && (e->ival == a || e->ival == b)) {
      ok = false;
      return;
    }
    if (e->op == ExprOp::Load) {
      ok = index_ok(e->args[0]);
      // The index itself may read memory (a gather): look inside for stray uses.
      for (const auto& x : e->args[0]->args)
        if (x->op == ExprOp::Load) walk(x);
      return;
    }
    for (const auto& x : e->args) walk(x);
  };
  walk(value);
  return ok;
}

void merge_inner_dims(Schedule& s) {
  for (auto& kernel : s.kernels)
    for (auto& stage : kernel.stages)
      // A vector reduction's dim 0 is the kept vector dim: only its reduced dims merge.
      for (int k = static_cast<int>(stage.inner.size()) - 2; k >= (stage.vector_reduce ? 1 : 0); --k)
        if (mergeable(stage, k)) apply_merge(stage, k);
}

}  // namespace ember
