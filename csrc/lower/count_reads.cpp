// LowerCtx::count_reads (lowering.h): how many times each element of a node's output
// would be computed if it stayed lazy, the figure after_node's realize rule reads.
#include "lower/lowering.h"

namespace ember {

std::vector<std::vector<double>> LowerCtx::count_reads(const Graph& g) {
  const auto& nodes = g.nodes;
  std::vector<std::vector<double>> reads(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) reads[i].assign(nodes[i].outputs.size(), 0.0);
  auto numel_of = [](const TensorType& t) {
    return t.is_tensor && !t.opaque ? static_cast<double>(product(t.dims()).hint()) : 0.0;
  };
  std::function<void(const Arg&, double)> add = [&](const Arg& a, double r) {
    if (a.is_tensor()) reads.at(a.ref.node).at(a.ref.index) += r;
    for (const auto& x : a.list) add(x, r);
  };
  for (const auto& a : g.outputs) add(a, 1.0);
  // Users come after their inputs: from the last node back, a node's reads are complete
  // before it passes them on.
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& u = nodes[i];
    if (!is_view_op(u.op) || u.args.empty() || !u.args[0].is_tensor()) {
      for (const auto& a : u.args) add(a, 1.0);
      continue;
    }
    const double base = numel_of(g.type_of(u.args[0].ref));
    double r = 0;
    for (size_t o = 0; o < u.outputs.size(); ++o) {
      // A view read more than once is stored by the same rule, and then read once.
      const double own = reads[i][o] > kReadOnce ? 1.0 : reads[i][o];
      r += base > 0 ? numel_of(u.outputs[o]) / base * own : own;
    }
    add(u.args[0], r);
    for (size_t k = 1; k < u.args.size(); ++k) add(u.args[k], 1.0);
  }
  return reads;
}

}  // namespace ember
