// Reshapes of lazy values: see reshape.h.
#include "lower/reshape.h"

#include <memory>

#include "lower/ops_common.h"

namespace ember {

// With symbolic sizes the grouping of dims follows the hints, and every group must
// match exactly (canonical forms), so a result holds for all sizes.
std::optional<Dims> view_strides(const Dims& sizes, const Dims& strides, const Dims& shape) {
  Dim numel = product(sizes);
  if (sizes.empty() || numel == 0) return contiguous_strides(shape);
  Dims out(shape.size(), Dim(1));
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  Dim chunk_base_stride = strides.back();
  Dim tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel.hint() < tensor_numel.hint() || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

namespace {

// A reshape as groups of dims: each group is a run of non-unit input dims and a run
// of non-unit output dims with the same number of elements (a split, a merge, or an
// identity). Positions index the full size lists. None when the sizes do not group
// exactly (symbolic sizes whose products differ in form).
struct ReshapeGroup {
  std::vector<size_t> in, out;
};

std::optional<std::vector<ReshapeGroup>> reshape_groups(const Dims& from, const Dims& to) {
  std::vector<size_t> a, b;
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1) a.push_back(d);
  for (size_t d = 0; d < to.size(); ++d)
    if (to[d] != 1) b.push_back(d);
  std::vector<ReshapeGroup> groups;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    ReshapeGroup g{{a[i]}, {b[j]}};
    Dim pa = from[a[i++]], pb = to[b[j++]];
    while (pa.hint() != pb.hint()) {
      if (pa.hint() < pb.hint()) {
        if (i == a.size()) return std::nullopt;
        g.in.push_back(a[i]);
        pa *= from[a[i++]];
      } else {
        if (j == b.size()) return std::nullopt;
        g.out.push_back(b[j]);
        pb *= to[b[j++]];
      }
    }
    if (pa != pb) return std::nullopt;
    groups.push_back(std::move(g));
  }
  if (i != a.size() || j != b.size()) return std::nullopt;
  return groups;
}

// The work of computing a value again: its ops, each load one, the index arithmetic of
// loads not counted (a reshape's divisions are per row, and the same in a copy).
int64_t value_cost(const Expr& e) {
  if (e->op == ExprOp::Load) return 1;
  int64_t c = (e->op == ExprOp::Const || e->op == ExprOp::Var) ? 0 : (is_transcendental(e->op) ? 8 : 1);
  for (const auto& a : e->args) c += value_cost(a);
  return c;
}

}  // namespace

bool LowerCtx::cheap_to_recompute(const TensorIR& t) const {
  std::vector<Expr> idx;
  for (size_t d = 0; d < t.sizes.size(); ++d) idx.push_back(var(-1000 - static_cast<int>(d)));
  return value_cost(t.fn(idx)) < opts_.realize_cost_threshold;
}

// A reshape of a lazy value as an index remap, when the value is cheap to compute
// again and the innermost output dim stays an affine function of one input dim (its
// group is a split or an identity): the merged groups outside it cost a division per
// row, not per element, and the copy the reshape would otherwise realize (a full write
// and read of the tensor) is gone. Inductor reindexes views of pointwise values the
// same way.
std::optional<TensorIR> lazy_reshape(LowerCtx& ctx, const TensorIR& in, const Dims& shape) {
  // A costly value (a gather chain, a softmax's input) is stored: a reader that loads
  // it more than once (a softmax's three passes) would compute it each time.
  if (!ctx.cheap_to_recompute(in)) return std::nullopt;
  auto groups = reshape_groups(in.sizes, shape);
  if (!groups || groups->empty() || groups->back().in.size() != 1) return std::nullopt;
  Dims from = in.sizes;
  std::vector<ReshapeGroup> gs = std::move(*groups);
  return ctx.lazy(in.dtype, shape, [in, from, shape, gs](const std::vector<Expr>& idx) {
    std::vector<Expr> src(from.size(), int_const(0));
    for (const ReshapeGroup& g : gs) {
      Expr linear = int_const(0);
      Dim inner = 1;
      for (size_t k = g.out.size(); k-- > 0;) {
        linear = add(linear, mul(idx[g.out[k]], inner.expr()));
        inner *= shape[g.out[k]];
      }
      if (g.in.size() == 1) {
        src[g.in[0]] = linear;
        continue;
      }
      Dim below = 1;
      for (size_t k = g.in.size(); k-- > 0;) {
        Expr e = below == 1 ? linear : binary(ExprOp::FloorDiv, linear, below.expr(), DType::I64);
        if (k > 0) e = binary(ExprOp::Mod, e, from[g.in[k]].expr(), DType::I64);
        src[g.in[k]] = e;
        below *= from[g.in[k]];
      }
    }
    return in.fn(src);
  }, {&in});
}

std::optional<TensorIR> LowerCtx::realize_before_reshape(const TensorIR& t, const Dims& strides) {
  // Stored in the reshaped value's shape (its eager layout, else contiguous) when a view
  // of that gives these strides: the kernel that computes it is the producer's.
  auto same_layout = [&](const Dims& have) {
    for (size_t d = 0; d < t.sizes.size(); ++d)
      if (!(t.sizes[d] == 1) && have[d] != strides[d]) return false;
    return true;
  };
  const TensorIR& src = *t.reshaped_from;
  for (const Dims& have : {src.preferred_strides, contiguous_strides(src.sizes)}) {
    if (have.empty()) continue;
    auto st = view_strides(src.sizes, have, t.sizes);
    if (!st || !same_layout(*st)) continue;
    StridedView v = *realize(src, have).view;
    v.sizes = t.sizes;
    v.strides = *st;
    TensorIR r = from_view(v);
    r.origins = t.origins;
    return r;
  }
  return std::nullopt;
}

}  // namespace ember
