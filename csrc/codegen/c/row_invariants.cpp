#include <string>
#include <utility>
#include <vector>

#include "codegen/c/kernel_printer.h"

namespace ember {

// Float terms that depend on exactly one inner loop var and on nothing that changes
// from row to row (no outer var, no buffer this kernel writes): batch-norm's
// per-channel 1/sqrt(var + eps) under a pointwise or pooling loop. Computed once
// per call into an array before the row loop, instead of once per row.
void KernelPrinter::row_invariants(const Expr& e, const Dims& inner, std::vector<std::pair<Expr, int>>& out,
                                   std::vector<int>& symbolic) const {
  if (e->op == ExprOp::Var || e->op == ExprOp::Const) return;
  bool on_outer = false;
  for (size_t d = 0; d < k_.outer.size(); ++d) on_outer |= depends_on(e, outer_var(static_cast<int>(d)));
  int used = -1, count = 0;
  for (size_t d = 0; d < inner.size(); ++d)
    if (depends_on(e, inner_var(static_cast<int>(d)))) {
      used = static_cast<int>(d);
      ++count;
    }
  bool own_buffer = false;
  for (int b : loaded_buffers(e)) own_buffer |= m_.producer[b].kernel == ki_;
  // The array is sized at compile time: a term over a symbolic dim stays in the row loop.
  const bool hoistable = !on_outer && count == 1 && !own_buffer && is_float(e->dtype) && e->op != ExprOp::Load &&
                         cost(e) >= 2 && inner[used].hint() <= 4096;
  if (hoistable && !inner[used].is_static()) {
    symbolic.push_back(used);
    return;
  }
  if (hoistable) {
    for (const auto& [x, d] : out)
      if (equal(x, e)) return;
    out.push_back({e, used});
    return;
  }
  for (const auto& a : e->args) row_invariants(a, inner, out, symbolic);
}

void KernelPrinter::precompute_row_invariants(KernelInfo& info) {
  for (size_t st = 0; st < k_.stages.size(); ++st) {
    const Stage& stage = k_.stages[st];
    if (stage.vector_reduce || stage.inner.empty() || k_.outer_numel().hint() < 2) continue;
    std::vector<std::pair<Expr, int>> found;
    std::vector<int> symbolic;
    for (const auto& item : stage.items) row_invariants(item.value, stage.inner, found, symbolic);
    if (!symbolic.empty())
      info.generic.push_back("stage " + std::to_string(st) + ": " + std::to_string(symbolic.size()) +
                             " row-invariant term(s) computed per row, not once per call (inner dim " +
                             print_dim(stage.inner[symbolic[0]]) + " is symbolic)");
    for (const auto& [e, d] : found) {
      std::string name = em_->fresh("rowinv");
      std::string iv = "i" + std::to_string(d);
      em_->open_scope({{inner_var(d), iv}});
      std::string v = em_->emit(e);
      em_->line(name + "[" + iv + "] = " + v + ";");
      std::vector<std::string> body = em_->close_scope();
      const int64_t extent = stage.inner[d].hint();  // static (row_invariants)
      em_->line(CEmitter::c_type(e->dtype) + " " + name + "[" + std::to_string(extent) + "];");
      em_->line("#pragma omp simd");
      em_->line("for (int64_t " + iv + " = 0; " + iv + " < " + std::to_string(extent) + "LL; ++" + iv + ") {");
      for (const auto& l : body) em_->line("  " + l);
      em_->line("}");
      row_invariant_names_[st].push_back({e, name + "[" + iv + "]", d});
    }
  }
}

}  // namespace ember
