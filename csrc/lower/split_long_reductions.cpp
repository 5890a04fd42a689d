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
};

// Whether the load of `c` that moves with the most reduced dims steps one element along
// the innermost of them: the slice is read contiguously, as a row.
bool reads_rows(const ComputedBuffer& c, int innermost_var) {
  const Expr best = main_reduced_load(c).first;
  if (!best) return false;
  auto k = coefficient(best->args[0], innermost_var);
  return k && *k == 1;
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
  if (results == 0 || results > kSplitMaxResults || slice < kSplitMinSlice || ch.dims.empty()) return std::nullopt;
  if (!reads_rows(c, c.reduce_vars[ch.dims.back()])) return std::nullopt;
  const int64_t want = std::min((kSplitTargetBlocks + results - 1) / results, slice / kSplitMinChunk);
  if (want < 2) return std::nullopt;
  auto size = [&](size_t i) { return c.reduce_sizes[ch.dims[i]].hint(); };
  // Whole outer dims while they fit (never the innermost: each chunk keeps reading rows).
  while (ch.whole + 1 < ch.dims.size() && ch.count * size(ch.whole) <= want) ch.count *= size(ch.whole++);
  // Then the divisor of the next dim that brings the count nearest the wanted one.
  const double rest = static_cast<double>(want) / static_cast<double>(ch.count);
  double best = std::abs(std::log(rest));
  const int64_t s = size(ch.whole);
  for (int64_t f = 2; f <= s && f <= 2 * want; ++f) {
    if (s % f != 0 || slice / (ch.count * f) < kSplitMinChunk) continue;
    const double off = std::abs(std::log(static_cast<double>(f) / rest));
    if (off < best) {
      best = off;
      ch.factor = f;
    }
  }
  ch.count *= ch.factor;
  if (ch.count < 2) return std::nullopt;
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
  part.sizes = c.sizes;
  std::unordered_map<int, Expr> sub;
  for (size_t d = 0; d < c.sizes.size(); ++d) {
    part.vars.push_back(c.vars[d] < 0 ? -1 : p.num_vars++);
    if (c.vars[d] >= 0) sub[c.vars[d]] = var(part.vars.back());
  }
  // The chunk dims: the whole ones, then the cut one's chunks.
  Dims chunk_sizes;
  for (size_t i = 0; i <= ch.whole && i < ch.dims.size(); ++i) {
    const int64_t n = i < ch.whole ? c.reduce_sizes[ch.dims[i]].hint() : ch.factor;
    if (n == 1) continue;
    chunk_sizes.push_back(Dim(n));
  }
  const size_t first_chunk = part.sizes.size();
  for (const Dim& n : chunk_sizes) {
    part.sizes.push_back(n);
    part.vars.push_back(p.num_vars++);
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
  std::vector<Expr> idx;
  for (size_t d = 0; d < c.sizes.size(); ++d) idx.push_back(c.vars[d] < 0 ? int_const(0) : var(c.vars[d]));
  c.reduce_sizes = chunk_sizes;
  c.reduce_vars.clear();
  for (size_t i = 0; i < chunk_sizes.size(); ++i) {
    c.reduce_vars.push_back(p.num_vars++);
    idx.push_back(var(c.reduce_vars.back()));
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
