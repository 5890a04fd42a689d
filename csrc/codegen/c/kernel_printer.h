// The C printer's kernel printer (codegen/c/kernel.h prints a Schedule with it): one
// exported function per kernel, computing rows [begin, end) of its outer loop. Its parts
// are in codegen/c/: kernel.cpp (the function, its arguments and row loop, and
// generate_c), row_stage.cpp (a stage's loop nest, blocked float sums, split stages'
// chunks), vector_stage.cpp (vector stages: SIMD lanes of a kept dim), row_invariants.cpp
// (per-call arrays of values that do not change from row to row), branch_runs.cpp (loops
// split where a cat's or select's linear condition changes), row_prefetch.cpp (gathered
// rows fetched a few rows ahead).
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codegen/accumulator.h"
#include "codegen/c/kernel.h"
#include "codegen/c_emitter.h"
#include "schedule/placement.h"

namespace ember {

// The values a stage computes for every element (appended to `out`, each once): a Where's
// arms are left out, since an arm's loads may be out of bounds where it is not taken
// (they print clamped, or only in the taken arm). Defined in row_buffers.cpp.
void unconditional_values(const Expr& e, std::vector<Expr>& out, std::unordered_set<const ExprNode*>& seen);

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
inline std::vector<std::string> chunk_loop_head(const Chunks& c) {
  return {"#pragma omp parallel for schedule(static) if (!omp_in_parallel())",
          "for (int64_t ch = 0; ch < " + c.used + "; ++ch) {",
          "  const int64_t ch_lo = ch * " + c.span + ", ch_hi = ch_lo + " + c.span + " < " + c.extent + " ? ch_lo + " +
              c.span + " : " + c.extent + ";"};
}


class KernelPrinter {
 public:
  KernelPrinter(const Program& p, const Schedule& s, const Placement& m, int k)
      : p_(p), s_(s), m_(m), ki_(k), k_(s.kernels[k]) {}

  std::string print(KernelInfo& info);

 private:
  // Whether a load of the stage steps by more than kMaxSimdStep elements along `var`
  // (stores that step wide vectorize well: measured the same as scalar ones).
  bool loads_step_wide(const Stage& st, int var) const;
  // Stages whose loop carries a dependence beyond an OpenMP reduction clause:
  // arg-reductions and scans run as plain sequential loops.
  bool stage_has_arg(const Stage& st) const;
  // A size as C text: a literal, or a function-scope value computed from sym[].
  std::string dim_text(const Dim& d);
  // Whether a loop may run longer than n iterations (a symbolic size may).
  static bool may_exceed(const Dim& d, int64_t n) { return !d.is_static() || d.hint() > n; }
  // The outer coordinates of the row whose flat index is the C value `flat`, as C text.
  std::vector<std::string> row_coordinates(const std::string& flat);
  // The current element's flat index in the stage's inner dims (an arg-reduction's).
  std::string flat_index(const Stage& stage);

  void print_stage(int st);                                                      // row_stage.cpp
  void run_row_chunks(const Stage& stage, const Chunks& chunks, std::vector<Acc>& accs);
  // A pointwise stage's innermost loop (dim d) as runs, one loop per Where arm whose
  // condition is linear in the loop var (branch_runs.cpp); false: not such a stage, nothing printed.
  bool print_branch_runs(int st, int d, bool simd);
  void print_vector_stage(int st);                                               // vector_stage.cpp
  void run_vector_chunks(const Stage& stage, const Chunks& chunks, std::vector<Acc>& accs);
  void bind_vector_locals();
  static void lane_invariants(const Expr& e, int reduced_dims, std::vector<Expr>& out);
  // row_invariants.cpp; `symbolic`: dims of terms left per row only because the dim is symbolic.
  void row_invariants(const Expr& e, const Dims& inner, std::vector<std::pair<Expr, int>>& out,
                      std::vector<int>& symbolic) const;
  void precompute_row_invariants(KernelInfo& info);
  void precompute_row_buffers();  // row_buffers.cpp
  // In the row scope: gathered rows of the row kRowsAhead ahead prefetched (row_prefetch.cpp).
  void print_row_prefetch();

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
  // A value one stage of a row computes and stores into an array, a later one reads.
  struct RowBuffer {
    Expr expr;
    std::string ref;  // "rowbufN[i0]"
  };
  std::map<size_t, std::vector<RowBuffer>> row_buffer_stores_;  // per stage
  std::map<size_t, std::vector<RowBuffer>> row_buffer_loads_;   // per stage
};

}  // namespace ember
