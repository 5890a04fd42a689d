#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/c/kernel_printer.h"

namespace ember {

namespace {

// Rows ahead. A row of BART-small's embeddings (128 floats, 2 lines of the table a row
// away from the last) took 40 us cold in a step without, 33 prefetching one row ahead,
// 19-29 two or four ahead (docs/benchmarks.md).
constexpr int64_t kRowsAhead = 4;
// A gathered row shorter than this is left to the caches: the next row's index costs
// about as much as the row; longer than kMaxBytes, only its first kMaxBytes are fetched
// ahead (by then the row's own loads stream the rest).
constexpr int64_t kMinBytes = 256;
constexpr int64_t kMaxBytes = 4096;
constexpr int64_t kLineBytes = 64;
constexpr size_t kMaxGathers = 4;
// Var ids of the coordinates of the row ahead: outer vars of no kernel.
constexpr int kAheadVarBase = kOuterVarBase + (1 << 21);

}  // namespace

// A row loop that reads a row of a table through an index read per row (an embedding's
// gather, feeding a LayerNorm in the same kernel) finds that row in memory, not in cache,
// when the kernel runs inside a step: the hardware prefetcher sees no stream across rows,
// and a multi-stage row (the mean, the variance, the normalized store) is too long for the
// out-of-order window to reach the next row's loads, so each row waits out a miss.
// Inductor's kernel for it runs its first pass (the mean) over every row alone, short
// enough to overlap them. Here each row first prefetches the gathered rows kRowsAhead
// rows ahead: their index expressions are evaluated at that row (loads of the index
// buffer included, which the kernel reads there anyway) with the inner var at 0, and
// their lines touched with __builtin_prefetch, which never faults.
//
// Taken: unconditional loads of a plain stage (one inner dim, static, not a vector
// stage) whose index reads another buffer (a load in the index) and steps by one element
// along the inner dim, of a buffer this kernel does not write, nor does any load in the
// index.
void KernelPrinter::print_row_prefetch() {
  struct Gather {
    Expr load;
    int64_t elements;  // of the row prefetched
  };
  std::vector<Gather> gathers;
  for (const auto& stage : k_.stages) {
    if (stage.vector_reduce || stage.inner.size() != 1 || !stage.inner[0].is_static()) continue;
    std::vector<Expr> values;  // the loads among them: those the stage performs for every element
    std::unordered_set<const ExprNode*> seen;
    for (const auto& item : stage.items) unconditional_values(item.value, values, seen);
    for (const auto& l : values) {
      if (l->op != ExprOp::Load) continue;
      const Expr& index = l->args[0];
      std::vector<int> index_reads = loaded_buffers(index);
      if (index_reads.empty() || coefficient(index, inner_var(0)) != std::optional<int64_t>(1)) continue;
      bool written_here = m_.producer[l->ival].kernel == ki_;
      for (int b : index_reads) written_here |= m_.producer[b].kernel == ki_;
      const int64_t size = dtype_size(l->dtype);
      if (written_here || size <= 0 || stage.inner[0].hint() * size < kMinBytes) continue;
      bool known = false;
      for (const auto& g : gathers) known |= equal(g.load, l);
      if (!known && gathers.size() < kMaxGathers)
        gathers.push_back({l, std::min(stage.inner[0].hint(), kMaxBytes / size)});
    }
  }
  if (gathers.empty()) return;

  // The row ahead's coordinates, as vars of a scope of their own: the index expressions
  // print there, and what they share with the row's own code stays out of it.
  std::vector<std::pair<int, std::string>> ahead_vars;
  std::unordered_map<int, Expr> to_ahead = {{inner_var(0), int_const(0)}};
  for (size_t d = 0; d < k_.outer.size(); ++d) {
    const int v = kAheadVarBase + static_cast<int>(d);
    ahead_vars.push_back({v, "p" + std::to_string(d)});
    to_ahead[outer_var(static_cast<int>(d))] = var(v);
  }
  em_->open_scope(ahead_vars);
  em_->line("const int64_t xa = x + " + std::to_string(kRowsAhead) + "LL;");
  const std::vector<std::string> coords = row_coordinates("xa");
  for (size_t d = 0; d < coords.size(); ++d) em_->line("const int64_t p" + std::to_string(d) + " = " + coords[d] + ";");
  for (const auto& g : gathers) {
    const std::string start = em_->emit(substitute(g.load->args[0], to_ahead));
    const std::string& base = em_->buffer_name(static_cast<int>(g.load->ival));
    em_->line("for (int64_t c = 0; c < " + std::to_string(g.elements) + "LL; c += " +
              std::to_string(std::max<int64_t>(1, kLineBytes / dtype_size(g.load->dtype))) +
              ") __builtin_prefetch(&" + base + "[" + start + " + c]);");
  }
  std::vector<std::string> body = em_->close_scope();
  em_->line("if (x + " + std::to_string(kRowsAhead) + "LL < end) {");
  for (const auto& l : body) em_->line("  " + l);
  em_->line("}");
}

}  // namespace ember
