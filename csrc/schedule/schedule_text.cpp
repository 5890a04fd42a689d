#include "schedule/schedule_text.h"

#include <sstream>
#include <stdexcept>

#include "ir/expr_text.h"
#include "lower/program_text.h"

namespace ember {

std::string print_schedule(const Schedule& s, const Program& p) {
  std::vector<DType> dtypes;
  for (const auto& b : p.buffers) dtypes.push_back(b.dtype);
  std::ostringstream os;
  for (const auto& step : s.steps) {
    if (step.kind == Schedule::Step::Kind::Extern) {
      const ExternCall& e = p.externs[step.index];
      os << "extern %" << e.node << " " << e.op << "  # " << e.reason << '\n';
      continue;
    }
    const Kernel& k = s.kernels[step.index];
    os << "kernel " << k.name << " outer=" << print_dims(k.outer) << '\n';
    for (size_t i = 0; i < k.stages.size(); ++i) {
      const Stage& st = k.stages[i];
      os << "  stage " << i << (st.vector_reduce ? " vector" : "");
      if (st.split > 1) os << " split=" << st.split;
      os << " inner=" << print_dims(st.inner) << ':';
      for (const auto& it : st.items) {
        const ComputedBuffer& c = p.computed[it.computed];
        os << " buf" << c.buffer;
        if (c.scan_dim >= 0) os << "(scan " << reduce_op_name(c.reduce_op) << ")";
        else if (c.is_reduction) os << "(" << reduce_op_name(c.reduce_op) << ")";
        else if (it.scatter_add) os << "(scatter_add)";
      }
      os << '\n';
      for (const auto& it : st.items)
        os << "    " << (it.is_scan ? "scan " : it.is_reduction ? "reduce " : "") << "buf"
           << p.computed[it.computed].buffer << "[" << print_expr(it.store_index, &dtypes)
           << "] " << (it.scatter_add ? "+=" : "=") << " " << print_expr(it.value, &dtypes) << '\n';
    }
  }
  return os.str();
}

std::string schedule_summary(const std::string& schedule_text) {
  std::istringstream in(schedule_text);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("    ", 0) != 0) out += line + "\n";
  return out;
}

Schedule parse_schedule(const std::string& text, const Program& p) {
  std::vector<DType> dtypes;
  for (const auto& b : p.buffers) dtypes.push_back(b.dtype);
  std::vector<int> producer(p.buffers.size(), -1);
  for (size_t c = 0; c < p.computed.size(); ++c) producer[p.computed[c].buffer] = static_cast<int>(c);
  std::vector<bool> extern_used(p.externs.size(), false);

  Schedule s;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    ProgramReader in(line, number, p.symbol_hints);
    if (in.at_end()) continue;
    if (in.try_word("extern")) {
      // Extern calls by their node, in the order the program's steps take them.
      const int node = in.value_ref().node;
      int index = -1;
      for (const auto& step : p.steps)
        if (step.kind == Step::Kind::Extern && p.externs[step.index].node == node && !extern_used[step.index]) {
          index = step.index;
          break;
        }
      if (index < 0) in.error("no extern call of %" + std::to_string(node) + " left in the program");
      extern_used[index] = true;
      s.steps.push_back({Schedule::Step::Kind::Extern, index});
      continue;  // the op and reason after it are the program's
    }
    if (in.try_word("kernel")) {
      Kernel k;
      k.name = in.identifier();
      in.expect_word("outer");
      in.expect('=');
      k.outer = in.dims('[', ']');
      in.expect_end();
      s.steps.push_back({Schedule::Step::Kind::Kernel, static_cast<int>(s.kernels.size())});
      s.kernels.push_back(std::move(k));
      continue;
    }
    if (s.kernels.empty()) in.error("expected a kernel or an extern call");
    Kernel& k = s.kernels.back();
    if (in.try_word("stage")) {
      if (in.integer() != static_cast<int64_t>(k.stages.size())) in.error("stages must be numbered 0, 1, ... in order");
      Stage st;
      st.vector_reduce = in.try_word("vector");
      if (in.try_word("split")) {
        in.expect('=');
        st.split = static_cast<int>(in.integer());
      }
      in.expect_word("inner");
      in.expect('=');
      st.inner = in.dims('[', ']');
      in.expect(':');  // the summary after it is the items' below
      k.stages.push_back(std::move(st));
      continue;
    }
    if (k.stages.empty()) in.error("expected a stage");
    KernelItem item;
    item.is_scan = in.try_word("scan");
    item.is_reduction = !item.is_scan && in.try_word("reduce");
    const int b = in.buffer_ref();
    if (static_cast<size_t>(b) >= producer.size() || producer[b] < 0) in.error("buf" + std::to_string(b) + " is not computed");
    item.computed = producer[b];
    in.expect('[');
    item.store_index = in.expr(dtypes);
    in.expect(']');
    item.scatter_add = in.try_consume('+');  // `+=`: a scatter-add
    in.expect('=');
    item.value = in.expr(dtypes);
    in.expect_end();
    k.stages.back().items.push_back(std::move(item));
  }
  return s;
}

}  // namespace ember
