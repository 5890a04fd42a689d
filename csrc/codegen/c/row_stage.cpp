#include <string>
#include <vector>

#include "codegen/c/kernel_printer.h"
#include "codegen/stage_items.h"
#include "schedule/accumulator.h"

namespace ember {

// Float sums longer than kCpuSumBlock (schedule/accumulator.h) accumulate in blocks
// of that many: each block's partial (split across SIMD lanes) is added to a double total,
// which keeps the error near that of eager's cascade summation at one double add per
// block.

void KernelPrinter::print_stage(int st) {
  const Stage& stage = k_.stages[st];
  if (stage.vector_reduce) {
    print_vector_stage(st);
    return;
  }
  const int row_level = em_->depth();
  const Dim inner_numel = product(stage.inner);
  auto blocks_sum = [&](size_t i) {
    const auto& c = p_.computed[stage.items[i].computed];
    return c.is_reduction && !stage.items[i].is_scan && c.reduce_op == ReduceOp::Sum && is_float(c.acc_dtype) &&
           may_exceed(inner_numel, kCpuSumBlock);
  };
  bool blocked = false;  // some float sum accumulates per block (kCpuSumBlock)
  for (size_t i = 0; i < stage.items.size(); ++i) blocked |= blocks_sum(i);
  // A split stage runs dim 0 in chunks (blocked single loops in whole blocks);
  // everything from the accumulators to the block totals is private to a chunk.
  const Chunks chunks = chunk_plan(stage.split, stage.inner.empty() ? Dim(1) : stage.inner[0],
                                   stage.inner.size() == 1 && blocked ? kCpuSumBlock : 1,
                                   [this](const Dim& d) { return dim_text(d); });
  if (chunks.count > 1) em_->open_scope({});
  // Accumulators live in the row scope (in a chunk's scope when split).
  std::vector<Acc> accs(stage.items.size());
  std::vector<std::string> clauses;
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const auto& c = p_.computed[stage.items[i].computed];
    if (c.is_reduction) accs[i] = declare_acc(*em_, c, CEmitter::c_type(c.acc_dtype), blocks_sum(i), &clauses);
  }
  if (stage_has_arg(stage)) clauses.clear();
  // Inner loop nest. The innermost of a pointwise stage may print as runs of its Where
  // arms (branch_runs.cpp), one loop each.
  const size_t dims = stage.inner.size();
  for (size_t d = 0; d + 1 < dims; ++d) {
    em_->open_scope({{inner_var(static_cast<int>(d)), "i" + std::to_string(d)}});
    if (d == 0) bind_vector_locals();
    for (const auto& inv : row_invariant_names_[st])
      if (inv.dim == static_cast<int>(d)) em_->bind_value(inv.expr, inv.name);
  }
  const int last = static_cast<int>(dims) - 1;
  const bool runs = dims > 0 && !blocked && chunks.count == 1 && !stage_has_arg(stage) &&
                    print_branch_runs(st, last, !loads_step_wide(stage, inner_var(last)));
  if (dims > 0 && !runs) {
    em_->open_scope({{inner_var(last), "i" + std::to_string(last)}});
    if (last == 0) bind_vector_locals();
    for (const auto& inv : row_invariant_names_[st])
      if (inv.dim == last) em_->bind_value(inv.expr, inv.name);
  }
  if (!runs) {
    for (const auto& rb : row_buffer_loads_[st]) em_->bind_value(rb.expr, rb.ref);
    print_stage_items(*em_, {p_, stage, m_.in_memory, accs, [&] { return flat_index(stage); }, ""});
    for (const auto& rb : row_buffer_stores_[st]) em_->line(rb.ref + " = " + em_->emit(rb.expr) + ";");
  }
  // Close the loops from the inside out, adding the SIMD pragma to the innermost.
  for (size_t d = runs ? dims - 1 : dims; d-- > 0;) {
    std::vector<std::string> body = em_->close_scope();
    std::string iv = "i" + std::to_string(d);
    bool innermost = d + 1 == stage.inner.size();
    std::vector<std::string> loop;
    if (innermost && !stage_has_arg(stage) && !loads_step_wide(stage, inner_var(static_cast<int>(d)))) {
      std::string pragma = "#pragma omp simd";
      for (const auto& cl : clauses) pragma += " " + cl;
      loop.push_back(pragma);
    }
    // Dim 0 of a split stage runs over its chunk's range [ch_lo, ch_hi).
    const bool chunked = d == 0 && chunks.count > 1;
    std::string n = chunked ? "ch_hi" : dim_text(stage.inner[d]);
    std::string first = chunked ? "ch_lo" : "0";
    bool in_blocks = innermost && blocked && may_exceed(stage.inner[d], kCpuSumBlock);
    std::string lo = in_blocks ? iv + "b" : first;
    std::string hi = in_blocks ? "(" + lo + " + " + std::to_string(kCpuSumBlock) + "LL < " + n + " ? " + lo + " + " +
                                     std::to_string(kCpuSumBlock) + "LL : " + n + ")"
                               : n;
    loop.push_back("for (int64_t " + iv + " = " + lo + "; " + iv + " < " + hi + "; ++" + iv + ") {");
    for (const auto& l : body) loop.push_back("  " + l);
    loop.push_back("}");
    if (!(innermost && blocked)) {
      for (const auto& l : loop) em_->line(l);
      continue;
    }
    // One block: fresh f32 partials (the names the body accumulates into), then
    // their sum into the double totals.
    if (in_blocks) em_->line("for (int64_t " + lo + " = " + first + "; " + lo + " < " + n + "; " + lo + " += " + std::to_string(kCpuSumBlock) + "LL) {");
    else em_->line("{");
    for (const auto& a : accs)
      if (!a.wide.empty()) em_->line("  " + a.type + " " + a.acc + " = 0;");
    for (const auto& l : loop) em_->line("  " + l);
    for (const auto& a : accs)
      if (!a.wide.empty()) em_->line("  " + a.wide + " += " + a.acc + ";");
    em_->line("}");
  }
  if (chunks.count > 1) run_row_chunks(stage, chunks, accs);
  for (auto& a : accs)
    if (!a.wide.empty()) {
      em_->line("const " + a.type + " " + a.acc + "_t = (" + a.type + ")" + a.wide + ";");
      a.acc += "_t";
    }
  // Finish reductions: the result is a row-scope local, stored if needed.
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const KernelItem& item = stage.items[i];
    const auto& c = p_.computed[item.computed];
    if (!c.is_reduction || item.is_scan) continue;
    const Buffer& buf = p_.buffers[c.buffer];
    std::string result = finish_acc(*em_, c, accs[i], buf.dtype);
    if (m_.in_memory[c.buffer]) em_->line(CEmitter::store_text(em_->buffer_name(c.buffer), em_->emit(item.store_index), buf.dtype, result));
    em_->bind_local(c.buffer, result, row_level);
  }
}

// Closes a split row stage's chunk scope: each chunk leaves its accumulators in
// per-chunk arrays, the chunks run in parallel, and their partials combine in
// chunk order into row-scope accumulators that `accs` then names.
void KernelPrinter::run_row_chunks(const Stage& stage, const Chunks& chunks, std::vector<Acc>& accs) {
  const std::string n = std::to_string(chunks.count);
  std::vector<std::string> decls;
  auto partial = [&](const std::string& type, const std::string& value) {
    std::string name = value + "_ch";
    decls.push_back(type + " " + name + "[" + n + "];");
    em_->line(name + "[ch] = " + value + ";");
    return name;
  };
  struct Partials {
    std::string value, flag, index;
  };
  std::vector<Partials> parts(accs.size());
  for (size_t i = 0; i < accs.size(); ++i) {
    const Acc& a = accs[i];
    if (a.acc.empty()) continue;
    parts[i].value = a.wide.empty() ? partial(a.type, a.acc) : partial("double", a.wide);
    if (!a.flag.empty()) parts[i].flag = partial("int", a.flag);
    if (!a.index.empty()) parts[i].index = partial("int64_t", a.index);
  }
  std::vector<std::string> body = em_->close_scope();
  for (const auto& l : decls) em_->line(l);
  for (const auto& l : chunk_loop_head(chunks)) em_->line(l);
  for (const auto& l : body) em_->line("  " + l);
  em_->line("}");
  for (size_t i = 0; i < accs.size(); ++i) {
    Acc& a = accs[i];
    if (a.acc.empty()) continue;
    const auto& c = p_.computed[stage.items[i].computed];
    const Partials& pt = parts[i];
    // Combined values start from chunk 0 and take the later chunks in order.
    std::string& value = a.wide.empty() ? a.acc : a.wide;
    value = em_->fresh("comb");
    em_->line((a.wide.empty() ? a.type : std::string("double")) + " " + value + " = " + pt.value + "[0];");
    std::vector<std::string> step;
    if (!a.index.empty()) {
      a.index = em_->fresh("comb");
      em_->line("int64_t " + a.index + " = " + pt.index + "[0];");
      step.push_back(arg_update(c, a, pt.value + "[ch]", pt.index + "[ch]"));
    } else {
      step.push_back(combine_text(a.wide.empty() ? c.reduce_op : ReduceOp::Sum, value, pt.value + "[ch]"));
    }
    if (!a.flag.empty()) {
      a.flag = em_->fresh("comb");
      em_->line("int " + a.flag + " = " + pt.flag + "[0];");
      step.push_back(combine_text(ReduceOp::Any, a.flag, pt.flag + "[ch]"));
    }
    em_->line("for (int64_t ch = 1; ch < " + chunks.used + "; ++ch) {");
    for (const auto& l : step) em_->line("  " + l);
    em_->line("}");
  }
}

}  // namespace ember
