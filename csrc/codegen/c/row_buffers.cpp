#include <string>
#include <unordered_set>
#include <vector>

#include "codegen/c/kernel_printer.h"

namespace ember {

namespace {

// Only a value that costs at least one transcendental op (expr.cpp's cost counts one as
// 8 nodes) pays for its round trip through the array.
constexpr int64_t kMinCost = 8;
constexpr int64_t kMaxRow = 4096;  // elements: 16 KB of stack for a float row

bool plain_row(const Stage& s) {
  return !s.vector_reduce && s.split < 2 && s.inner.size() == 1 && s.inner[0].is_static() &&
         s.inner[0].hint() <= kMaxRow;
}

}  // namespace

void unconditional_values(const Expr& e, std::vector<Expr>& out, std::unordered_set<const ExprNode*>& seen) {
  if (!seen.insert(e.get()).second) return;
  out.push_back(e);
  if (e->op == ExprOp::Where) {
    unconditional_values(e->args[0], out, seen);
    return;
  }
  for (const auto& a : e->args) unconditional_values(a, out, seen);
}

// Values that a stage computes per element and a later stage of the same row computes
// again: softmax's exp(x - max), summed by one stage and scaled by the next. The first
// stage also stores each such value into an array one row long, and the later stage
// reads it back, as Inductor's CPU kernels keep a local buffer and ATen's softmax writes
// exp into its output before scaling: one exp per element instead of two, and the same
// value bit for bit. Both stages loop over one inner dim, the same static one of at most
// kMaxRow elements; the value must not read a buffer this kernel writes in the first
// stage or later (an earlier stage's result, such as the row's max, is fixed for the row).
void KernelPrinter::precompute_row_buffers() {
  std::vector<int> written_from(p_.buffers.size(), -1);  // buffer -> first stage writing it
  for (size_t st = 0; st < k_.stages.size(); ++st)
    for (const auto& item : k_.stages[st].items) {
      int& w = written_from[p_.computed[item.computed].buffer];
      if (w < 0) w = static_cast<int>(st);
    }
  for (size_t a = 0; a < k_.stages.size(); ++a) {
    const Stage& first = k_.stages[a];
    if (!plain_row(first) || stage_has_arg(first)) continue;
    std::vector<Expr> candidates;
    std::unordered_set<const ExprNode*> seen;
    for (const auto& item : first.items) unconditional_values(item.value, candidates, seen);
    auto usable = [&](const Expr& e) {
      if (!is_float(e->dtype) || cost(e) < kMinCost || !depends_on(e, inner_var(0))) return false;
      for (int b : loaded_buffers(e))
        if (written_from[b] >= static_cast<int>(a)) return false;
      return true;
    };
    for (size_t b = a + 1; b < k_.stages.size(); ++b) {
      const Stage& later = k_.stages[b];
      if (!plain_row(later) || !(later.inner[0] == first.inner[0])) continue;
      // The largest shared values: a match is taken whole, its operands not searched.
      std::vector<Expr> shared;
      std::vector<Expr> todo;
      for (const auto& item : later.items) todo.push_back(item.value);
      while (!todo.empty()) {
        Expr e = todo.back();
        todo.pop_back();
        bool found = false;
        if (usable(e))
          for (const auto& c : candidates)
            if (equal(c, e)) {
              found = true;
              break;
            }
        bool known = false;
        for (const auto& s : shared) known |= equal(s, e);
        if (found && !known) shared.push_back(e);
        if (!found)
          for (const auto& x : e->args) todo.push_back(x);
      }
      for (const auto& e : shared) {
        bool stored = false;  // by an earlier pair: later stages read that array
        for (const auto& [st, list] : row_buffer_stores_)
          for (const auto& rb : list)
            if (equal(rb.expr, e)) {
              row_buffer_loads_[b].push_back(rb);
              stored = true;
            }
        if (stored) continue;
        RowBuffer rb{e, em_->fresh("rowbuf") + "[i0]"};
        em_->line(CEmitter::c_type(e->dtype) + " " + rb.ref.substr(0, rb.ref.size() - 4) + "[" +
                  std::to_string(first.inner[0].hint()) + "];");
        row_buffer_stores_[a].push_back(rb);
        row_buffer_loads_[b].push_back(rb);
      }
    }
  }
}

}  // namespace ember
