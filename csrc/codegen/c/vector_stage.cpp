#include <string>
#include <vector>

#include "codegen/c/kernel_printer.h"

namespace ember {

// Closes a split vector stage's chunk scope, like run_row_chunks with a partial
// per chunk and lane: [chunk][K] arrays, combined in chunk order.
void KernelPrinter::run_vector_chunks(const Stage& stage, const Chunks& chunks, std::vector<Acc>& accs) {
  const int64_t K = stage.inner[0].hint();  // vector stages keep a static dim
  const std::string n = std::to_string(chunks.count), Ks = std::to_string(K) + "LL";
  std::vector<std::string> decls, copies, firsts, steps, combined;
  auto partial = [&](const std::string& type, std::string& value, ReduceOp op) {
    std::string part = value + "_ch", comb = em_->fresh("comb");
    decls.push_back(type + " " + part + "[" + n + "][" + std::to_string(K) + "];");
    copies.push_back(part + "[ch][i0] = " + value + "[i0];");
    combined.push_back(type + " " + comb + "[" + std::to_string(K) + "];");
    firsts.push_back(comb + "[i0] = " + part + "[0][i0];");
    steps.push_back(combine_text(op, comb + "[i0]", part + "[ch][i0]"));
    value = comb;
  };
  for (size_t i = 0; i < accs.size(); ++i) {
    Acc& a = accs[i];
    const auto& c = p_.computed[stage.items[i].computed];
    if (!a.wide.empty()) {
      partial("double", a.wide, ReduceOp::Sum);
      a.acc = em_->fresh("comb");
      combined.push_back(a.type + " " + a.acc + "[" + std::to_string(K) + "];");
    } else {
      partial(a.type, a.acc, c.reduce_op);
    }
    if (!a.flag.empty()) partial("int", a.flag, ReduceOp::Any);  // NaN seen in any chunk
  }
  em_->line("for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) {");
  for (const auto& l : copies) em_->line("  " + l);
  em_->line("}");
  std::vector<std::string> body = em_->close_scope();
  for (const auto& l : decls) em_->line(l);
  for (const auto& l : chunk_loop_head(chunks)) em_->line(l);
  for (const auto& l : body) em_->line("  " + l);
  em_->line("}");
  for (const auto& l : combined) em_->line(l);
  em_->line("for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) {");
  for (const auto& l : firsts) em_->line("  " + l);
  em_->line("}");
  em_->line("for (int64_t ch = 1; ch < " + chunks.used + "; ++ch) {");
  em_->line("  for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) {");
  for (const auto& l : steps) em_->line("    " + l);
  em_->line("  }");
  em_->line("}");
}

void KernelPrinter::bind_vector_locals() {
  for (const auto& [buffer, acc] : vector_locals_) em_->bind_local(buffer, acc + "[i0]", em_->depth());
}

// Maximal subexpressions of `e` that vary with the kept dim (inner var 0) but not
// with the reduced dims, and are worth computing once per lane (they contain more
// than a load): batch-norm's 1/sqrt(var + eps) and friends.
void KernelPrinter::lane_invariants(const Expr& e, int reduced_dims, std::vector<Expr>& out) {
  bool on_lane = depends_on(e, inner_var(0));
  bool on_reduced = false;
  for (int d = 1; d <= reduced_dims; ++d) on_reduced |= depends_on(e, inner_var(d));
  if (!on_lane) return;
  if (!on_reduced) {
    // Values only: a precomputed index would turn contiguous loads into gathers.
    if (is_float(e->dtype) && e->op != ExprOp::Load && cost(e) >= 2) {
      for (const auto& x : out)
        if (equal(x, e)) return;
      out.push_back(e);
    }
    return;
  }
  for (const auto& a : e->args) lane_invariants(a, reduced_dims, out);
}

// A vector reduction, blocked like TorchInductor's: for each block of up to 16
// lanes of the kept dim, lane-invariant terms are computed once into small
// arrays, then the reduced dims loop with the lanes innermost (SIMD).
void KernelPrinter::print_vector_stage(int st) {
  const Stage& stage = k_.stages[st];
  const int64_t K = stage.inner[0].hint();  // the kept dim is static (fuse)
  const std::string Ks = std::to_string(K) + "LL";
  constexpr int kLanes = 16;
  const int reduced = static_cast<int>(stage.inner.size()) - 1;
  // Each lane accumulates every element of the reduced dims: float sums over more
  // than kLaneChain of them add per-block partials into a double total instead.
  constexpr int64_t kLaneChain = 256;
  Dim chain = 1, below = 1;  // elements per lane; those per step of the outermost reduced dim
  for (int d = 1; d <= reduced; ++d) chain *= stage.inner[d];
  for (int d = 2; d <= reduced; ++d) below *= stage.inner[d];
  // Steps per block; one when the inner reduced dims are symbolic (any size).
  const int64_t block1 = below.is_static() ? std::max<int64_t>(1, kLaneChain / std::max<int64_t>(below.hint(), 1)) : 1;
  auto blocks_sum = [&](const ComputedBuffer& c) {
    return c.reduce_op == ReduceOp::Sum && is_float(c.acc_dtype) && may_exceed(chain, kLaneChain) && reduced >= 1;
  };
  bool blocked = false;
  for (const auto& item : stage.items) blocked |= blocks_sum(p_.computed[item.computed]);
  // A split stage runs the outermost reduced dim in chunks of whole blocks; the
  // accumulator arrays and everything up to the block totals are private to a chunk.
  const Chunks chunks = chunk_plan(stage.split, reduced >= 1 ? stage.inner[1] : Dim(1), blocked ? block1 : 1,
                                   [this](const Dim& d) { return dim_text(d); });
  if (chunks.count > 1) em_->open_scope({});
  std::vector<Acc> accs(stage.items.size());
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const auto& c = p_.computed[stage.items[i].computed];
    Acc& a = accs[i];
    bool flt = is_float(c.acc_dtype);
    if (blocks_sum(c)) {
      a.acc = em_->fresh("vacc");
      a.wide = a.acc + "_w";
      a.type = CEmitter::c_type(c.acc_dtype);
      em_->line(a.type + " " + a.acc + "[" + std::to_string(K) + "];");
      em_->line("double " + a.wide + "[" + std::to_string(K) + "];");
      em_->line("for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) " + a.wide + "[i0] = 0;");
      continue;
    }
    bool any_all = c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All;
    std::string ct = any_all ? "int" : CEmitter::c_type(c.acc_dtype);
    const std::string init = reduction_identity(c.reduce_op, c.acc_dtype);
    a.acc = em_->fresh("vacc");
    a.type = ct;
    em_->line(ct + " " + a.acc + "[" + std::to_string(K) + "];");
    std::string init_line = "for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) " + a.acc + "[i0] = " + init + ";";
    if (flt && (c.reduce_op == ReduceOp::Max || c.reduce_op == ReduceOp::Min)) {
      a.flag = em_->fresh("vnan");
      em_->line("int " + a.flag + "[" + std::to_string(K) + "];");
      init_line = "for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) { " + a.acc + "[i0] = " + init + "; " + a.flag + "[i0] = 0; }";
    }
    em_->line(init_line);
  }
  std::vector<Expr> invariants;
  for (const auto& item : stage.items) lane_invariants(item.value, reduced, invariants);

  // Block loop: its body is collected in a scope that binds no IR var.
  em_->open_scope({});
  em_->line("const int64_t nb = " + Ks + " - cb < " + std::to_string(kLanes) + " ? " + Ks + " - cb : " + std::to_string(kLanes) + ";");
  std::vector<std::string> pre_names;
  if (!invariants.empty()) {
    em_->open_scope({{inner_var(0), "i0"}});
    em_->line("const int64_t i0 = cb + l;");
    bind_vector_locals();
    std::vector<std::string> stores;
    for (size_t j = 0; j < invariants.size(); ++j) {
      std::string name = em_->fresh("lane");
      pre_names.push_back(name);
      stores.push_back(name + "[l] = " + em_->emit(invariants[j]) + ";");
    }
    for (const auto& l : stores) em_->line(l);
    std::vector<std::string> body = em_->close_scope();
    for (size_t j = 0; j < invariants.size(); ++j)
      em_->line(CEmitter::c_type(invariants[j]->dtype) + " " + pre_names[j] + "[" + std::to_string(kLanes) + "];");
    em_->line("#pragma omp simd");
    em_->line("for (int64_t l = 0; l < nb; ++l) {");
    for (const auto& l : body) em_->line("  " + l);
    em_->line("}");
  }
  for (int d = 1; d <= reduced; ++d) em_->open_scope({{inner_var(d), "i" + std::to_string(d)}});
  em_->open_scope({{inner_var(0), "i0"}});
  em_->line("const int64_t i0 = cb + l;");
  bind_vector_locals();
  for (size_t j = 0; j < invariants.size(); ++j) em_->bind_value(invariants[j], pre_names[j] + "[l]");
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const auto& c = p_.computed[stage.items[i].computed];
    std::string v = em_->emit(stage.items[i].value);
    const Acc& a = accs[i];
    std::string slot = a.wide.empty() ? a.acc + "[i0]" : a.acc + "_p[l]";
    accumulate_into(*em_, c.reduce_op, slot, a.flag.empty() ? "" : a.flag + "[i0]", v);
  }
  // Close the lanes (SIMD), then the reduced dims from the inside out, then the block.
  {
    std::vector<std::string> body = em_->close_scope();
    em_->line("#pragma omp simd");
    em_->line("for (int64_t l = 0; l < nb; ++l) {");
    for (const auto& l : body) em_->line("  " + l);
    em_->line("}");
  }
  for (int d = reduced; d >= 1; --d) {
    std::vector<std::string> body = em_->close_scope();
    std::string iv = "i" + std::to_string(d);
    // Dim 1 of a split stage runs over its chunk's range [ch_lo, ch_hi).
    const bool chunked = d == 1 && chunks.count > 1;
    std::string n = chunked ? "ch_hi" : dim_text(stage.inner[d]);
    std::string first = chunked ? "ch_lo" : "0";
    if (d > 1 || !blocked) {
      em_->line("for (int64_t " + iv + " = " + first + "; " + iv + " < " + n + "; ++" + iv + ") {");
      for (const auto& l : body) em_->line("  " + l);
      em_->line("}");
      continue;
    }
    // Blocks of the outermost reduced dim: fresh lane partials, then their sum into
    // the double totals.
    std::string b = std::to_string(block1) + "LL";
    em_->line("for (int64_t i1b = " + first + "; i1b < " + n + "; i1b += " + b + ") {");
    for (const auto& a : accs)
      if (!a.wide.empty()) em_->line("  " + a.type + " " + a.acc + "_p[" + std::to_string(kLanes) + "] = {0};");
    em_->line("  for (int64_t i1 = i1b; i1 < (i1b + " + b + " < " + n + " ? i1b + " + b + " : " + n + "); ++i1) {");
    for (const auto& l : body) em_->line("    " + l);
    em_->line("  }");
    for (const auto& a : accs)
      if (!a.wide.empty()) {
        em_->line("  #pragma omp simd");
        em_->line("  for (int64_t l = 0; l < nb; ++l) " + a.wide + "[cb + l] += " + a.acc + "_p[l];");
      }
    em_->line("}");
  }
  {
    std::vector<std::string> body = em_->close_scope();
    em_->line("for (int64_t cb = 0; cb < " + Ks + "; cb += " + std::to_string(kLanes) + ") {");
    for (const auto& l : body) em_->line("  " + l);
    em_->line("}");
  }
  if (chunks.count > 1) run_vector_chunks(stage, chunks, accs);
  // Finish: NaN, rounding to the stored type, stores; results stay in the arrays.
  em_->open_scope({{inner_var(0), "i0"}});
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const KernelItem& item = stage.items[i];
    const auto& c = p_.computed[item.computed];
    const Buffer& buf = p_.buffers[c.buffer];
    std::string slot = accs[i].acc + "[i0]";
    if (!accs[i].wide.empty()) em_->line(slot + " = (" + accs[i].type + ")" + accs[i].wide + "[i0];");
    if (!accs[i].flag.empty()) em_->line(slot + " = " + accs[i].flag + "[i0] ? NAN : " + slot + ";");
    if (buf.dtype == DType::F16) em_->line(slot + " = ember_round_h(" + slot + ");");
    if (buf.dtype == DType::BF16) em_->line(slot + " = ember_round_bf(" + slot + ");");
    if (m_.in_memory[c.buffer]) em_->line(CEmitter::store_text(em_->buffer_name(c.buffer), em_->emit(item.store_index), buf.dtype, slot));
    vector_locals_.push_back({c.buffer, accs[i].acc});
  }
  std::vector<std::string> body = em_->close_scope();
  if (body.empty()) return;
  em_->line("#pragma omp simd");
  em_->line("for (int64_t i0 = 0; i0 < " + Ks + "; ++i0) {");
  for (const auto& l : body) em_->line("  " + l);
  em_->line("}");
}

}  // namespace ember
