#include "schedule/kernel.h"

#include <sstream>

namespace ember {

Dim Kernel::outer_numel() const { return product(outer); }

int64_t Kernel::work_per_row() const {
  int64_t w = 0;
  for (const auto& st : stages) {
    int64_t n = product(st.inner).hint();
    w += n * static_cast<int64_t>(st.items.size());
  }
  return w;
}

std::string print_schedule(const Schedule& s, const Program& p, const Graph& g) {
  std::ostringstream os;
  auto ints = [&](const Dims& v) { os << print_dims(v); };
  for (const auto& step : s.steps) {
    if (step.kind == Schedule::Step::Kind::Extern) {
      const auto& e = p.externs[step.index];
      os << "extern " << g.nodes[e.node].op << "  # " << e.reason << '\n';
      continue;
    }
    const Kernel& k = s.kernels[step.index];
    os << "kernel " << k.name << " outer=";
    ints(k.outer);
    os << '\n';
    for (size_t i = 0; i < k.stages.size(); ++i) {
      os << "  stage " << i << (k.stages[i].vector_reduce ? " vector" : "");
      if (k.stages[i].split > 1) os << " split=" << k.stages[i].split;
      os << " inner=";
      ints(k.stages[i].inner);
      os << ':';
      for (const auto& it : k.stages[i].items) {
        const auto& c = p.computed[it.computed];
        os << " buf" << c.buffer;
        if (c.scan_dim >= 0) os << "(scan " << reduce_op_name(c.reduce_op) << ")";
        else if (c.is_reduction) os << "(" << reduce_op_name(c.reduce_op) << ")";
      }
      os << '\n';
    }
  }
  return os.str();
}

}  // namespace ember
