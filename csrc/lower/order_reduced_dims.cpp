#include "lower/order_reduced_dims.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace ember {

namespace {

// The element step of each reduced dim in the load of `c` whose index moves with the
// most of them (the first such load), or nothing when that index is not affine in them.
std::optional<std::vector<int64_t>> reduced_steps(const ComputedBuffer& c) {
  auto [best, most] = main_reduced_load(c);
  if (most < 2) return std::nullopt;  // one dim (or none) moves: nothing to order
  std::vector<int64_t> steps;
  for (int v : c.reduce_vars) {
    if (v < 0) {
      steps.push_back(std::numeric_limits<int64_t>::max());  // a unit dim: no loop, keep it outside
      continue;
    }
    auto k = coefficient(best->args[0], v);
    if (!k) return std::nullopt;
    steps.push_back(*k == 0 ? std::numeric_limits<int64_t>::max() : std::llabs(*k));
  }
  return steps;
}

}  // namespace

std::pair<Expr, int> main_reduced_load(const ComputedBuffer& c) {
  Expr best;
  int most = 0;
  walk_loads(c.body, [&](const Expr& e) {
    int n = 0;
    for (int v : c.reduce_vars) n += v >= 0 && depends_on(e->args[0], v);
    if (n > most) {
      most = n;
      best = e;
    }
  });
  return {best, most};
}

void order_reduced_dims(Program& p) {
  if (p.num_symbols > 0) return;
  for (auto& c : p.computed) {
    if (!c.is_reduction || c.scan_dim >= 0 || c.is_arg_reduction() || c.reduce_vars.size() < 2) continue;
    const auto steps = reduced_steps(c);
    if (!steps) continue;
    std::vector<size_t> order(steps->size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*steps)[a] > (*steps)[b]; });
    if (std::is_sorted(order.begin(), order.end())) continue;
    Dims sizes;
    std::vector<int> vars;
    for (size_t d : order) {
      sizes.push_back(c.reduce_sizes[d]);
      vars.push_back(c.reduce_vars[d]);
    }
    c.reduce_sizes = std::move(sizes);
    c.reduce_vars = std::move(vars);
  }
}

}  // namespace ember
