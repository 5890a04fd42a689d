#include "codegen/c_kernel.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "codegen/c_emitter.h"
#include "codegen/c_prelude.h"
#include "schedule/accumulator.h"
#include "schedule/placement.h"

namespace ember {

namespace {

struct Acc {
  std::string acc, flag, index;  // accumulator, NaN flag (max/min), arg index (argmax/argmin)
  std::string wide;              // blocked float sums: the double total of the block partials
  std::string type;              // the C type of acc
};

// A split stage's dim in chunks: `count` chunks of `span` iterations (whole units:
// the blocks of a blocked sum), the last one shorter. Fixed by the sizes alone, so a
// result does not depend on how many threads run the chunks. A symbolic dim keeps the
// compile-time chunk count as a capacity (the partial arrays' size) and computes the
// span and the number of chunks from the call's sizes; the texts are C expressions.
struct Chunks {
  int64_t count = 1;               // chunks, or at most this many (symbolic dim)
  std::string span, extent, used;  // C text: iterations per chunk, the dim, chunks in use
};

// `text` prints a size as C (a literal, or a function-scope value computed from sym[]).
template <class Text>
Chunks chunk_plan(int split, const Dim& extent, int64_t unit, Text text) {
  Chunks c;
  if (split < 2) return c;
  c.count = split;
  if (extent.is_static()) {
    const int64_t e = extent.hint();
    const int64_t units = (e + unit - 1) / unit;
    const int64_t span = (units + split - 1) / split * unit;
    c.count = (e + span - 1) / span;
    c.span = std::to_string(span) + "LL";
    c.extent = std::to_string(e) + "LL";
    c.used = std::to_string(c.count) + "LL";
    return c;
  }
  const Dim units = floordiv(extent + (unit - 1), Dim(unit));
  const Dim span = max(floordiv(units + (split - 1), Dim(split)) * Dim(unit), Dim(unit));
  c.span = text(span);
  c.extent = text(extent);
  c.used = text(max(floordiv(extent + span - 1, span), Dim(1)));
  return c;
}

// The chunk loop, run by torch's OpenMP team; serial inside a launcher that
// already splits rows. Its body defines the chunk's range [ch_lo, ch_hi).
std::vector<std::string> chunk_loop_head(const Chunks& c) {
  return {"#pragma omp parallel for schedule(static) if (!omp_in_parallel())",
          "for (int64_t ch = 0; ch < " + c.used + "; ++ch) {",
          "  const int64_t ch_lo = ch * " + c.span + ", ch_hi = ch_lo + " + c.span + " < " + c.extent + " ? ch_lo + " +
              c.span + " : " + c.extent + ";"};
}

// `dst` combined with the partial `src` of a later chunk. Max/min partials are
// never NaN (their flags carry it); arg-reductions combine in combine_arg.
std::string combine_text(ReduceOp op, const std::string& dst, const std::string& src) {
  switch (op) {
    case ReduceOp::Sum: return dst + " += " + src + ";";
    case ReduceOp::Prod: return dst + " *= " + src + ";";
    case ReduceOp::Max: return dst + " = " + src + " > " + dst + " ? " + src + " : " + dst + ";";
    case ReduceOp::Min: return dst + " = " + src + " < " + dst + " ? " + src + " : " + dst + ";";
    case ReduceOp::Any: return dst + " |= " + src + ";";
    case ReduceOp::All: return dst + " &= " + src + ";";
    default: return "";
  }
}

// Float sums longer than kLongSum (schedule/accumulator.h) accumulate in blocks of
// that many: each block's partial (split across SIMD lanes) is added to a double total,
// which keeps the error near that of eager's cascade summation at one double add per
// block.

// GCC vectorizes an `omp simd` loop whose loads step by many elements per iteration (an
// NCHW tensor read along its channels, into a channels-last buffer) as one interleaved
// group as wide as the step: thousands of permutes, seconds to compile and, at a step of
// 1,024, 60x slower than the scalar loop (a 2x2 max-pool into channels-last: 5.6 ms
// against 93 us). Measured on loops of such loads: a step of 8 gains from the pragma,
// 32 is even, 128 loses 3x. A loop with a step beyond 32 runs without it.
constexpr int64_t kMaxSimdStep = 32;

// Whether e loads with a step beyond kMaxSimdStep elements along `var`.
bool steps_wide(const Expr& e, int var, std::unordered_set<const ExprNode*>& seen) {
  if (!seen.insert(e.get()).second) return false;
  if (e->op == ExprOp::Load) {
    std::optional<int64_t> step = coefficient(e->args[0], var);
    if (step && (*step > kMaxSimdStep || *step < -kMaxSimdStep)) return true;
  }
  for (const auto& a : e->args)
    if (steps_wide(a, var, seen)) return true;
  return false;
}

class KernelPrinter {
 public:
  KernelPrinter(const Program& p, const Schedule& s, const Placement& m, int k)
      : p_(p), s_(s), m_(m), ki_(k), k_(s.kernels[k]) {}

  std::string print(KernelInfo& info) {
    info.name = k_.name;
    info.rows = k_.outer_numel();
    info.work_per_row = std::max<int64_t>(1, k_.work_per_row());
    // Arguments: every buffer the kernel reads from memory or stores.
    std::set<int> args;
    for (size_t st = 0; st < k_.stages.size(); ++st)
      for (const auto& item : k_.stages[st].items) {
        int b = p_.computed[item.computed].buffer;
        if (m_.in_memory[b]) args.insert(b);
        std::function<void(const Expr&)> walk = [&](const Expr& e) {
          if (e->op == ExprOp::Load && !read_is_local(m_.producer[e->ival], s_, ki_, static_cast<int>(st), VectorResults::Local)) args.insert(static_cast<int>(e->ival));
          for (const auto& a : e->args) walk(a);
        };
        walk(item.value);
        for (int o : p_.computed[item.computed].origins) origins_.insert(o);
      }
    info.args.assign(args.begin(), args.end());
    info.origins.assign(origins_.begin(), origins_.end());

    std::unordered_map<int, CEmitter::BufferRef> refs;
    std::ostringstream head;
    head << "void " << k_.name << "(int64_t begin, int64_t end, char* const* args) {\n";
    head << "  EMBER_EXP_BOUNDS\n";
    if (p_.num_symbols > 0)
      head << "  const int64_t* restrict sym = (const int64_t*)args[" << info.args.size() << "];\n";
    for (size_t i = 0; i < info.args.size(); ++i) {
      int b = info.args[i];
      const Buffer& buf = p_.buffers[b];
      // Named by position, not buffer id: kernels that differ only in which buffers
      // they take print the same text, and generate_c keeps one of them.
      std::string name = "a" + std::to_string(i);
      bool written = buf.kind == Buffer::Kind::Computed && m_.producer[b].kernel == ki_;
      head << "  " << (written ? "" : "const ") << dtype_c_type(buf.dtype) << "* restrict " << name << " = ("
           << (written ? "" : "const ") << dtype_c_type(buf.dtype) << "*)args[" << i << "];\n";
      refs[b] = {name, buf.dtype, buf.extent()};
    }
    em_ = std::make_unique<CEmitter>(refs);

    precompute_row_invariants();

    // Row scope: decompose the flat row index into outer coordinates.
    std::vector<std::pair<int, std::string>> outer_vars;
    for (size_t d = 0; d < k_.outer.size(); ++d) outer_vars.push_back({outer_var(static_cast<int>(d)), "o" + std::to_string(d)});
    em_->open_scope(outer_vars);
    Dim stride = 1;
    std::vector<std::string> coords(k_.outer.size());
    for (size_t d = k_.outer.size(); d-- > 0;) {
      std::string q = stride == 1 ? "x" : "(x / " + dim_text(stride) + ")";
      coords[d] = d == 0 ? q : q + " % " + dim_text(k_.outer[d]);
      stride *= k_.outer[d];
    }
    for (size_t d = 0; d < k_.outer.size(); ++d) em_->line("const int64_t o" + std::to_string(d) + " = " + coords[d] + ";");
    // Loads of buffers this kernel writes are valid only after the stage that
    // writes them, so they may be hoisted to the row scope but no further.
    for (const auto& stage : k_.stages)
      for (const auto& item : stage.items) em_->set_min_load_level(p_.computed[item.computed].buffer, em_->depth());
    for (size_t st = 0; st < k_.stages.size(); ++st) print_stage(static_cast<int>(st));
    std::vector<std::string> row = em_->close_scope();

    std::ostringstream os;
    os << head.str();
    for (const auto& l : em_->function_lines()) os << "  " << l << "\n";
    bool simd_rows = k_.stages.size() == 1 && k_.stages[0].inner.empty() && !stage_has_arg(k_.stages[0]);
    if (simd_rows) os << "  #pragma omp simd\n";
    os << "  for (int64_t x = begin; x < end; ++x) {\n";
    for (const auto& l : row) os << "    " << l << "\n";
    os << "  }\n}\n";
    return os.str();
  }

 private:
  // Whether a load of the stage steps by more than kMaxSimdStep elements along `var`
  // (stores that step wide vectorize well: measured the same as scalar ones).
  bool loads_step_wide(const Stage& st, int var) const {
    std::unordered_set<const ExprNode*> seen;
    for (const auto& it : st.items)
      if (steps_wide(it.value, var, seen)) return true;
    return false;
  }

  // Stages whose loop carries a dependence beyond an OpenMP reduction clause:
  // arg-reductions and scans run as plain sequential loops.
  bool stage_has_arg(const Stage& st) const {
    for (const auto& it : st.items) {
      const auto& c = p_.computed[it.computed];
      if (it.is_scan) return true;
      if (c.is_arg_reduction()) return true;
    }
    return false;
  }

  // A size as C text: a literal, or a function-scope value computed from sym[].
  std::string dim_text(const Dim& d) {
    return d.is_static() ? std::to_string(d.hint()) + "LL" : em_->emit(d.expr());
  }
  // Whether a loop may run longer than n iterations (a symbolic size may).
  static bool may_exceed(const Dim& d, int64_t n) { return !d.is_static() || d.hint() > n; }

  void print_stage(int st) {
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
             may_exceed(inner_numel, kLongSum);
    };
    bool blocked = false;  // some float sum accumulates per block (kLongSum)
    for (size_t i = 0; i < stage.items.size(); ++i) blocked |= blocks_sum(i);
    // A split stage runs dim 0 in chunks (blocked single loops in whole blocks);
    // everything from the accumulators to the block totals is private to a chunk.
    const Chunks chunks = chunk_plan(stage.split, stage.inner.empty() ? Dim(1) : stage.inner[0],
                                     stage.inner.size() == 1 && blocked ? kLongSum : 1,
                                     [this](const Dim& d) { return dim_text(d); });
    if (chunks.count > 1) em_->open_scope({});
    // Accumulators live in the row scope (in a chunk's scope when split).
    std::vector<Acc> accs(stage.items.size());
    std::vector<std::string> clauses;
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const auto& c = p_.computed[stage.items[i].computed];
      if (c.is_reduction) accs[i] = declare_acc(c, clauses, blocks_sum(i));
    }
    if (stage_has_arg(stage)) clauses.clear();
    // Inner loop nest.
    for (size_t d = 0; d < stage.inner.size(); ++d) {
      em_->open_scope({{inner_var(static_cast<int>(d)), "i" + std::to_string(d)}});
      if (d == 0) bind_vector_locals();
      for (const auto& inv : row_invariant_names_[st])
        if (inv.dim == static_cast<int>(d)) em_->bind_value(inv.expr, inv.name);
    }
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const KernelItem& item = stage.items[i];
      const auto& c = p_.computed[item.computed];
      const Buffer& buf = p_.buffers[c.buffer];
      std::string v = em_->emit(item.value);
      if (item.is_scan) {
        // The running value after this step is the element: stored, and a local here.
        em_->line(accs[i].acc + (c.reduce_op == ReduceOp::Prod ? " *= " : " += ") + v + ";");
        std::string step = em_->fresh("scan");
        std::string conv = accs[i].acc;
        if (buf.dtype == DType::F16) conv = "ember_round_h(" + conv + ")";
        if (buf.dtype == DType::BF16) conv = "ember_round_bf(" + conv + ")";
        em_->line("const " + CEmitter::c_type(buf.dtype) + " " + step + " = " + conv + ";");
        if (m_.in_memory[c.buffer]) em_->line(CEmitter::store_text(em_->buffer_name(c.buffer), em_->emit(item.store_index), buf.dtype, step));
        em_->bind_local(c.buffer, step, em_->depth());
        continue;
      }
      if (!c.is_reduction) {
        if (m_.in_memory[c.buffer]) em_->line(CEmitter::store_text(em_->buffer_name(c.buffer), em_->emit(item.store_index), buf.dtype, v));
        em_->bind_local(c.buffer, v, em_->depth());
        continue;
      }
      accumulate(c, accs[i], v, stage);
    }
    // Close the loops from the inside out, adding the SIMD pragma to the innermost.
    for (size_t d = stage.inner.size(); d-- > 0;) {
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
      bool in_blocks = innermost && blocked && may_exceed(stage.inner[d], kLongSum);
      std::string lo = in_blocks ? iv + "b" : first;
      std::string hi = in_blocks ? "(" + lo + " + " + std::to_string(kLongSum) + "LL < " + n + " ? " + lo + " + " +
                                       std::to_string(kLongSum) + "LL : " + n + ")"
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
      if (in_blocks) em_->line("for (int64_t " + lo + " = " + first + "; " + lo + " < " + n + "; " + lo + " += " + std::to_string(kLongSum) + "LL) {");
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
      std::string result = finish_acc(c, accs[i], buf.dtype);
      if (m_.in_memory[c.buffer]) em_->line(CEmitter::store_text(em_->buffer_name(c.buffer), em_->emit(item.store_index), buf.dtype, result));
      em_->bind_local(c.buffer, result, row_level);
    }
  }

  // Closes a split row stage's chunk scope: each chunk leaves its accumulators in
  // per-chunk arrays, the chunks run in parallel, and their partials combine in
  // chunk order into row-scope accumulators that `accs` then names.
  void run_row_chunks(const Stage& stage, const Chunks& chunks, std::vector<Acc>& accs) {
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
        step.push_back(combine_arg(c, a, pt.value + "[ch]", pt.index + "[ch]"));
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

  // Closes a split vector stage's chunk scope, like run_row_chunks with a partial
  // per chunk and lane: [chunk][K] arrays, combined in chunk order.
  void run_vector_chunks(const Stage& stage, const Chunks& chunks, std::vector<Acc>& accs) {
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

  // A later chunk's arg-reduction partial replaces the running one only if strictly
  // better (or the first NaN), so the first extremum wins as in one pass.
  std::string combine_arg(const ComputedBuffer& c, const Acc& a, const std::string& v, const std::string& index) {
    std::string better = c.reduce_op == ReduceOp::ArgMax ? v + " > " + a.acc : v + " < " + a.acc;
    if (is_float(c.body->dtype)) better = "(" + better + ") || (" + v + " != " + v + " && " + a.acc + " == " + a.acc + ")";
    return "if (" + better + ") { " + a.acc + " = " + v + "; " + a.index + " = " + index + "; }";
  }

  // Float terms that depend on exactly one inner loop var and on nothing that changes
  // from row to row (no outer var, no buffer this kernel writes): batch-norm's
  // per-channel 1/sqrt(var + eps) under a pointwise or pooling loop. Computed once
  // per call into an array before the row loop, instead of once per row.
  void row_invariants(const Expr& e, const Dims& inner, std::vector<std::pair<Expr, int>>& out) const {
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
    if (!on_outer && count == 1 && !own_buffer && is_float(e->dtype) && e->op != ExprOp::Load && cost(e) >= 2 &&
        inner[used].is_static() && inner[used].hint() <= 4096) {
      for (const auto& [x, d] : out)
        if (equal(x, e)) return;
      out.push_back({e, used});
      return;
    }
    for (const auto& a : e->args) row_invariants(a, inner, out);
  }

  void precompute_row_invariants() {
    for (size_t st = 0; st < k_.stages.size(); ++st) {
      const Stage& stage = k_.stages[st];
      if (stage.vector_reduce || stage.inner.empty() || k_.outer_numel().hint() < 2) continue;
      std::vector<std::pair<Expr, int>> found;
      for (const auto& item : stage.items) row_invariants(item.value, stage.inner, found);
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

  // Results of earlier vector reductions, readable as acc[i0] inside loops over i0.
  void bind_vector_locals() {
    for (const auto& [buffer, acc] : vector_locals_) em_->bind_local(buffer, acc + "[i0]", em_->depth());
  }

  // Maximal subexpressions of `e` that vary with the kept dim (inner var 0) but not
  // with the reduced dims, and are worth computing once per lane (they contain more
  // than a load): batch-norm's 1/sqrt(var + eps) and friends.
  static void lane_invariants(const Expr& e, int reduced_dims, std::vector<Expr>& out) {
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
  void print_vector_stage(int st) {
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
      std::string init;
      switch (c.reduce_op) {
        case ReduceOp::Sum: case ReduceOp::Any: init = "0"; break;
        case ReduceOp::Prod: case ReduceOp::All: init = "1"; break;
        case ReduceOp::Max: init = flt ? "-INFINITY" : CEmitter::lowest_or_highest(c.acc_dtype, true); break;
        default: init = flt ? "INFINITY" : CEmitter::lowest_or_highest(c.acc_dtype, false); break;
      }
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
      switch (c.reduce_op) {
        case ReduceOp::Sum: em_->line(slot + " += " + v + ";"); break;
        case ReduceOp::Prod: em_->line(slot + " *= " + v + ";"); break;
        case ReduceOp::Any: em_->line(slot + " |= (" + v + " != 0);"); break;
        case ReduceOp::All: em_->line(slot + " &= (" + v + " != 0);"); break;
        default: {
          std::string cmp = c.reduce_op == ReduceOp::Max ? " > " : " < ";
          em_->line(slot + " = " + v + cmp + slot + " ? " + v + " : " + slot + ";");
          if (!a.flag.empty()) em_->line(a.flag + "[i0] |= " + v + " != " + v + ";");
        }
      }
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

  Acc declare_acc(const ComputedBuffer& c, std::vector<std::string>& clauses, bool blocked = false) {
    Acc a;
    a.acc = em_->fresh("acc");
    DType t = c.acc_dtype;
    std::string ct = CEmitter::c_type(t);
    bool flt = is_float(t);
    a.type = ct;
    switch (c.reduce_op) {
      case ReduceOp::Sum:
        if (blocked) {
          // The f32 partial a.acc is declared per block, where the loop is printed.
          a.wide = a.acc + "_w";
          em_->line("double " + a.wide + " = 0;");
        } else {
          em_->line(ct + " " + a.acc + " = 0;");
        }
        clauses.push_back("reduction(+:" + a.acc + ")");
        break;
      case ReduceOp::Prod:
        em_->line(ct + " " + a.acc + " = 1;");
        clauses.push_back("reduction(*:" + a.acc + ")");
        break;
      case ReduceOp::Max:
      case ReduceOp::Min: {
        bool mx = c.reduce_op == ReduceOp::Max;
        std::string init = flt ? (mx ? "-INFINITY" : "INFINITY") : CEmitter::lowest_or_highest(t, mx);
        em_->line(ct + " " + a.acc + " = " + init + ";");
        clauses.push_back(std::string("reduction(") + (mx ? "max:" : "min:") + a.acc + ")");
        if (flt) {
          a.flag = em_->fresh("nan");
          em_->line("int " + a.flag + " = 0;");
          clauses.push_back("reduction(|:" + a.flag + ")");
        }
        break;
      }
      case ReduceOp::Any:
        a.type = "int";
        em_->line("int " + a.acc + " = 0;");
        clauses.push_back("reduction(|:" + a.acc + ")");
        break;
      case ReduceOp::All:
        a.type = "int";
        em_->line("int " + a.acc + " = 1;");
        clauses.push_back("reduction(&:" + a.acc + ")");
        break;
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        DType vt = c.body->dtype;
        bool mx = c.reduce_op == ReduceOp::ArgMax;
        std::string init = is_float(vt) ? (mx ? "-INFINITY" : "INFINITY") : CEmitter::lowest_or_highest(vt, mx);
        a.type = CEmitter::c_type(vt);
        em_->line(a.type + " " + a.acc + " = " + init + ";");
        a.index = em_->fresh("arg");
        em_->line("int64_t " + a.index + " = 0;");
        break;
      }
    }
    return a;
  }

  void accumulate(const ComputedBuffer& c, const Acc& a, const std::string& v, const Stage& stage) {
    bool flt = is_float(c.acc_dtype);
    switch (c.reduce_op) {
      case ReduceOp::Sum: em_->line(a.acc + " += " + v + ";"); break;
      case ReduceOp::Prod: em_->line(a.acc + " *= " + v + ";"); break;
      case ReduceOp::Max:
        em_->line(a.acc + " = " + v + " > " + a.acc + " ? " + v + " : " + a.acc + ";");
        if (flt) em_->line(a.flag + " |= " + v + " != " + v + ";");
        break;
      case ReduceOp::Min:
        em_->line(a.acc + " = " + v + " < " + a.acc + " ? " + v + " : " + a.acc + ";");
        if (flt) em_->line(a.flag + " |= " + v + " != " + v + ";");
        break;
      case ReduceOp::Any: em_->line(a.acc + " |= (" + v + " != 0);"); break;
      case ReduceOp::All: em_->line(a.acc + " &= (" + v + " != 0);"); break;
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        // First extremum wins; NaN counts as the extremum (first NaN wins).
        std::string r = "0";
        Dim stride = 1;
        std::string flat;
        for (size_t d = stage.inner.size(); d-- > 0;) {
          std::string term = "i" + std::to_string(d) + (stride == 1 ? "" : " * " + dim_text(stride));
          flat = flat.empty() ? term : term + " + " + flat;
          stride *= stage.inner[d];
        }
        if (flat.empty()) flat = "0";
        std::string better = c.reduce_op == ReduceOp::ArgMax ? v + " > " + a.acc : v + " < " + a.acc;
        if (is_float(c.body->dtype)) better = "(" + better + ") || (" + v + " != " + v + " && " + a.acc + " == " + a.acc + ")";
        em_->line("if (" + better + ") { " + a.acc + " = " + v + "; " + a.index + " = " + flat + "; }");
        break;
      }
    }
  }

  std::string finish_acc(const ComputedBuffer& c, const Acc& a, DType out) {
    std::string r;
    switch (c.reduce_op) {
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin:
        return a.index;
      case ReduceOp::Max:
      case ReduceOp::Min:
        if (!a.flag.empty()) em_->line("if (" + a.flag + ") " + a.acc + " = NAN;");
        r = a.acc;
        break;
      case ReduceOp::Any:
      case ReduceOp::All:
        r = "(" + a.acc + " != 0)";
        break;
      default:
        r = a.acc;
    }
    // The local must equal what a load of the stored value would give.
    if (out == c.acc_dtype || c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All) return r;
    std::string name = em_->fresh("red");
    em_->line("const " + CEmitter::c_type(out) + " " + name + " = " + CEmitter::as_stored(r, out) + ";");
    return name;
  }

  const Program& p_;
  const Schedule& s_;
  const Placement& m_;
  int ki_;
  const Kernel& k_;
  std::unique_ptr<CEmitter> em_;
  std::set<int> origins_;
  std::vector<std::pair<int, std::string>> vector_locals_;
  struct RowInvariant {
    Expr expr;
    std::string name;
    int dim;
  };
  std::map<size_t, std::vector<RowInvariant>> row_invariant_names_;  // per stage
};

}  // namespace

namespace {

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

GeneratedCode generate_c(const Program& p, const Schedule& s) {
  GeneratedCode out;
  Placement m = place_buffers(p, s, VectorResults::Local);
  std::ostringstream os;
  os << c_prelude() << "\n";
  // Kernel text (launcher included) with its name as "@" -> the function that has it.
  std::unordered_map<std::string, std::string> printed;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    KernelInfo info;
    std::ostringstream text;
    text << KernelPrinter(p, s, m, static_cast<int>(k)).print(info) << "\n";
    // The launcher splits rows over OpenMP threads. Loaded into a PyTorch process,
    // libgomp.so.1 resolves to torch's own copy, so kernels run on the same thread
    // team as oneDNN and BLAS (hot, not competing for cores), as Inductor's do.
    bool split = false;
    for (const auto& st : s.kernels[k].stages) split |= st.split > 1;
    // A kernel with split stages and fewer rows than threads runs its rows here and
    // its split stages on the threads.
    std::string serial = split ? "rows <= grain || rows < omp_get_max_threads()" : "rows <= grain";
    text << "void " << info.name << "_launch(int64_t rows, int64_t grain, char* const* args) {\n"
         << "  if (" << serial << ") { " << info.name << "(0, rows, args); return; }\n"
         << "  const int64_t chunks = (rows + grain - 1) / grain;\n"
         << "  #pragma omp parallel for schedule(static)\n"
         << "  for (int64_t c = 0; c < chunks; ++c) {\n"
         << "    const int64_t b = c * grain, e = b + grain < rows ? b + grain : rows;\n"
         << "    " << info.name << "(b, e, args);\n"
         << "  }\n}\n\n";
    // Kernels that differ only in their buffers (a model's repeated layers) share one
    // function: less for the C compiler, the same machine code.
    auto [first, fresh] = printed.emplace(replace_all(text.str(), info.name, "@"), info.name);
    out.kernel_begin.push_back(static_cast<size_t>(os.tellp()));
    os << "/* " << info.name << ":";
    for (size_t a = 0; a < info.args.size(); ++a) os << " a" << a << "=buf" << info.args[a];
    if (!fresh) os << "; runs " << first->second;
    os << " */\n";
    if (fresh) os << text.str();
    info.function = first->second;
    out.kernels.push_back(std::move(info));
  }
  out.source = os.str();
  out.buffer_in_memory = m.in_memory;
  return out;
}

}  // namespace ember
