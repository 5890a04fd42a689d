#include "schedule/merge_outer_dims.h"

#include <unordered_map>

#include "schedule/merge_dims.h"

namespace ember {

namespace {

// Whether outer dims k and k+1 of `kernel` can be merged.
bool mergeable(const Kernel& kernel, int k) {
  const int a = outer_var(k), b = outer_var(k + 1);
  const Dim size_b = kernel.outer[k + 1];
  auto index_ok = [&](const Expr& index) { return index_merges(index, a, b, size_b); };
  for (const auto& stage : kernel.stages)
    for (const auto& item : stage.items)
      if (!vars_only_in_indices(item.value, a, b, index_ok) || !index_ok(item.store_index)) return false;
  return true;
}

// Rewrites vars after merging dims k and k+1: a := 0, b := merged, later dims shift down.
void apply_merge(Kernel& kernel, int k) {
  std::unordered_map<int, Expr> sub;
  sub[outer_var(k)] = int_const(0);
  sub[outer_var(k + 1)] = var(outer_var(k));
  for (size_t d = k + 2; d < kernel.outer.size(); ++d)
    sub[outer_var(static_cast<int>(d))] = var(outer_var(static_cast<int>(d) - 1));
  for (auto& stage : kernel.stages)
    for (auto& item : stage.items) {
      item.value = substitute(item.value, sub);
      item.store_index = substitute(item.store_index, sub);
    }
  kernel.outer[k] *= kernel.outer[k + 1];
  kernel.outer.erase(kernel.outer.begin() + k + 1);
}

}  // namespace

void merge_symbolic_outer_dims(Schedule& s) {
  for (auto& kernel : s.kernels)
    for (int k = static_cast<int>(kernel.outer.size()) - 2; k >= 0; --k)
      if ((!kernel.outer[k].is_static() || !kernel.outer[k + 1].is_static()) && mergeable(kernel, k))
        apply_merge(kernel, k);
}

}  // namespace ember
