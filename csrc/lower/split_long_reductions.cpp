#include "lower/split_long_reductions.h"

#include <cmath>
#include <optional>
#include <unordered_map>

#include "ir/simplify.h"
#include "lower/order_reduced_dims.h"

namespace ember {

namespace {

// How a reduction's slice is cut (reduced dims in the reduction's order): dims[0..whole)
// are chunk dims, dim `whole` is cut into `factor` chunks (1: not cut), the rest stay.
struct Chunks {
  std::vector<size_t> dims;  // the non-unit reduced dims
  size_t whole = 0;
  int64_t factor = 1;
  int64_t count = 1;  // chunks in all
  bool columns = false;  // partials laid out [chunks..., results...]: see reads_columns
};

// Whether the load of `c` that moves with the most reduced dims steps one element along
// the innermost of them: the slice is read contiguously, as a row.
bool reads_rows(const ComputedBuffer& c, int innermost_var) {
  const Expr best = main_reduced_load(c).first;
  if (!best) return false;
  auto k = coefficient(best->args[0], innermost_var);
  return k && *k == 1;
}

// Whether the load of `c` that moves with the most reduced dims steps one element along
// its innermost kept dim and more than one along every reduced dim: the results are
// columns, each reduced over rows strided in memory (a channels-last BatchNorm's
// statistics, a bias gradient). Returns that dim's size, 0 when not.
int64_t reads_columns(const ComputedBuffer& c) {
  const Expr best = main_reduced_load(c).first;
  int last = -1;
  for (size_t d = 0; d < c.sizes.size(); ++d)
    if (c.vars[d] >= 0) last = static_cast<int>(d);
  if (!best || last < 0) return 0;
  auto k = coefficient(best->args[0], c.vars[last]);
  if (!k || *k != 1) return 0;
  for (size_t d = 0; d < c.reduce_vars.size(); ++d) {
    if (c.reduce_vars[d] < 0) continue;
    auto r = coefficient(best->args[0], c.reduce_vars[d]);
    if (!r || *r == 0 || *r == 1) return 0;
  }
  return c.sizes[last].hint();
}

// Cuts the outer reduced dims into about `want` chunks of at least `min_chunk` elements
// each (whole dims while they fit, then the divisor of the next nearest the wanted
// count), never the innermost reduced dim when `keep_inner`.
bool cut(const ComputedBuffer& c, Chunks& ch, int64_t want, int64_t slice, int64_t min_chunk, bool keep_inner) {
  auto size = [&](size_t i) { return c.reduce_sizes[ch.dims[i]].hint(); };
  const size_t limit = keep_inner ? ch.dims.size() - 1 : ch.dims.size();
  while (ch.whole < limit && ch.whole + 1 < ch.dims.size() && ch.count * size(ch.whole) <= want) ch.count *= size(ch.whole++);
  const double rest = static_cast<double>(want) / static_cast<double>(ch.count);
  double best = std::abs(std::log(rest));
  const int64_t s = size(ch.whole);
  for (int64_t f = 2; f <= s && f <= 2 * want; ++f) {
    if (s % f != 0 || slice / (ch.count * f) < min_chunk) continue;
    const double off = std::abs(std::log(static_cast<double>(f) / rest));
    if (off < best) {
      best = off;
      ch.factor = f;
    }
  }
  ch.count *= ch.factor;
  return ch.count >= 2;
}

// A column reduction (reads_columns) of few result rows over long columns: chunks of at
// least kSplitMinColumnRows rows, about kSplitColumnBlocks chunk rows in all, so that
// the partials' kernel (a block a chunk, a thread a column) fills the GPU; the
// reduction of the partials is a column reduction of its own, which the CUDA column
// split takes.
std::optional<Chunks> choose_column_chunks(const ComputedBuffer& c, int64_t width, int64_t results, int64_t slice,
                                           Chunks ch) {
  if (width < 8 || width > kSplitMaxColumns) return std::nullopt;
  const int64_t rows = results / width;  // the results' other dims
  if (rows >= kSplitColumnBlocks / 8 || slice * width < kSplitMinColumnWork) return std::nullopt;
  const int64_t want = std::min((kSplitColumnBlocks + rows - 1) / rows, slice / kSplitMinColumnRows);
  if (want < 2) return std::nullopt;
  ch.columns = true;
  if (!cut(c, ch, want, slice, kSplitMinColumnRows, false)) return std::nullopt;
  // Fewer chunk rows than kSplitColumnBlocks / 16 would make the partials' kernel one of
  // few rows, which the column split takes anyway: not worth a third launch.
  if (ch.count * rows < kSplitColumnBlocks / 16) return std::nullopt;
  return ch;
}

std::optional<Chunks> choose_chunks(const ComputedBuffer& c) {
  if (!c.is_reduction || c.scan_dim >= 0 || c.is_arg_reduction()) return std::nullopt;
  if (c.reduce_op != ReduceOp::Sum && c.reduce_op != ReduceOp::Max && c.reduce_op != ReduceOp::Min) return std::nullopt;
  int64_t results = 1, slice = 1;
  for (const Dim& d : c.sizes) {
    if (!d.is_static()) return std::nullopt;
    results *= d.hint();
  }
  Chunks ch;
  for (size_t d = 0; d < c.reduce_sizes.size(); ++d) {
    if (!c.reduce_sizes[d].is_static()) return std::nullopt;
    slice *= c.reduce_sizes[d].hint();
    if (c.reduce_vars[d] >= 0) ch.dims.push_back(d);
  }
  if (results == 0 || ch.dims.empty()) return std::nullopt;
  if (const int64_t width = reads_columns(c)) return choose_column_chunks(c, width, results, slice, ch);
  if (results > kSplitMaxResults || slice < kSplitMinSlice) return std::nullopt;
  if (!reads_rows(c, c.reduce_vars[ch.dims.back()])) return std::nullopt;
  const int64_t want = std::min((kSplitTargetBlocks + results - 1) / results, slice / kSplitMinChunk);
  if (want < 2) return std::nullopt;
  // Whole outer dims while they fit (never the innermost: each chunk keeps reading rows),
  // then the divisor of the next dim that brings the count nearest the wanted one.
  if (!cut(c, ch, want, slice, kSplitMinChunk, true)) return std::nullopt;
  return ch;
}

// Splits reduction `ci` as `ch` says: adds the partials' buffer and computation, and
// makes the reduction read them. Returns the partials' computed index.
int split(Program& p, int ci, const Chunks& ch) {
  ComputedBuffer& c = p.computed[ci];
  ComputedBuffer part;
  part.is_reduction = true;
  part.reduce_op = c.reduce_op;
  part.acc_dtype = c.acc_dtype;
  part.origins = c.origins;
  // The chunk dims: the whole ones, then the cut one's chunks.
  Dims chunk_sizes;
  for (size_t i = 0; i <= ch.whole && i < ch.dims.size(); ++i) {
    const int64_t n = i < ch.whole ? c.reduce_sizes[ch.dims[i]].hint() : ch.factor;
    if (n == 1) continue;
    chunk_sizes.push_back(Dim(n));
  }
  // Rows: [results..., chunks...] (a result's partials side by side); columns: [chunks...,
  // results...] (each chunk's partials a row of columns, read as the columns were).
  const size_t first_chunk = ch.columns ? 0 : c.sizes.size();
  const size_t first_result = ch.columns ? chunk_sizes.size() : 0;
  part.sizes.resize(c.sizes.size() + chunk_sizes.size());
  part.vars.resize(part.sizes.size());
  std::unordered_map<int, Expr> sub;
  for (size_t d = 0; d < c.sizes.size(); ++d) {
    part.sizes[first_result + d] = c.sizes[d];
    part.vars[first_result + d] = c.vars[d] < 0 ? -1 : p.num_vars++;
    if (c.vars[d] >= 0) sub[c.vars[d]] = var(part.vars[first_result + d]);
  }
  for (size_t i = 0; i < chunk_sizes.size(); ++i) {
    part.sizes[first_chunk + i] = chunk_sizes[i];
    part.vars[first_chunk + i] = p.num_vars++;
  }
  size_t next_chunk = first_chunk;
  for (size_t i = 0; i < ch.dims.size(); ++i) {
    const size_t d = ch.dims[i];
    const int old = c.reduce_vars[d];
    if (i < ch.whole) {
      sub[old] = var(part.vars[next_chunk++]);
      continue;
    }
    const int64_t n = c.reduce_sizes[d].hint() / (i == ch.whole ? ch.factor : 1);
    const int q = p.num_vars++;
    part.reduce_sizes.push_back(Dim(n));
    part.reduce_vars.push_back(q);
    sub[old] = i == ch.whole && ch.factor > 1 ? add(mul(var(part.vars[next_chunk++]), n), var(q)) : var(q);
  }
  part.iter_order.resize(part.sizes.size());
  for (size_t d = 0; d < part.sizes.size(); ++d) part.iter_order[d] = static_cast<int>(d);
  std::unordered_map<int, int64_t> extents;
  for (size_t d = 0; d < part.sizes.size(); ++d)
    if (part.vars[d] >= 0) extents[part.vars[d]] = part.sizes[d].hint();
  for (size_t d = 0; d < part.reduce_vars.size(); ++d) extents[part.reduce_vars[d]] = part.reduce_sizes[d].hint();
  part.body = simplify_bounds(substitute(c.body, sub), extents);

  Buffer b;
  b.kind = Buffer::Kind::Computed;
  b.dtype = c.acc_dtype;
  b.sizes = part.sizes;
  b.strides = contiguous_strides(part.sizes);
  part.buffer = p.add_buffer(b);

  // The reduction itself, over the chunks' partials.
  std::vector<Expr> idx(part.sizes.size());
  for (size_t d = 0; d < c.sizes.size(); ++d) idx[first_result + d] = c.vars[d] < 0 ? int_const(0) : var(c.vars[d]);
  c.reduce_sizes = chunk_sizes;
  c.reduce_vars.clear();
  for (size_t i = 0; i < chunk_sizes.size(); ++i) {
    c.reduce_vars.push_back(p.num_vars++);
    idx[first_chunk + i] = var(c.reduce_vars.back());
  }
  c.body = load(part.buffer, strided_index(idx, b.strides, 0), c.acc_dtype);
  p.computed.push_back(std::move(part));
  return static_cast<int>(p.computed.size()) - 1;
}

}  // namespace

void split_long_reductions(Program& p) {
  if (p.num_symbols > 0) return;
  std::vector<Step> steps;
  for (const Step& st : p.steps) {
    if (st.kind == Step::Kind::Compute) {
      if (auto ch = choose_chunks(p.computed[st.index])) steps.push_back({Step::Kind::Compute, split(p, st.index, *ch)});
    }
    steps.push_back(st);
  }
  p.steps = std::move(steps);
}

}  // namespace ember
