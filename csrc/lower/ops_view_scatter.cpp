// The functional inverses of views: slice_scatter, select_scatter and
// diagonal_scatter write `src` into a copy of `self` where the view would read.
// Each is element-wise: an output element comes from `src` when its index lies in
// the view's image, else from `self`. Both sides stay lazy, so the scatter fuses
// with whatever produced them.
#include <algorithm>

#include "lower/ops_common.h"

namespace ember {

namespace {

int64_t arg_int_or(const Node& n, size_t i, int64_t dflt) {
  return n.args.size() > i && !n.args[i].is_none() ? n.args[i].as_int() : dflt;
}

Expr both(Expr a, Expr b) { return a ? binary(ExprOp::LogicalAnd, a, b, DType::Bool) : b; }

// out[idx] = in_view(idx) ? src[view_index(idx)] : self[idx]
std::vector<TensorIR> scatter_into(LowerCtx& ctx, const Node& n,
                                   std::function<Expr(const std::vector<Expr>&)> in_view,
                                   std::function<std::vector<Expr>(const std::vector<Expr>&)> view_index) {
  const TensorIR& self = ctx.tensor(n.args[0]);
  const TensorIR& src = ctx.tensor(n.args[1]);
  DType dt = ctx.out_type().dtype;
  return {ctx.lazy(dt, self.sizes, [self, src, dt, in_view, view_index](const std::vector<Expr>& idx) {
    Expr old = cast(self.fn(idx), dt);
    Expr cond = in_view(idx);
    if (!cond) return cast(src.fn(view_index(idx)), dt);
    return where(cond, cast(src.fn(view_index(idx)), dt), old);
  }, {&self, &src})};
}

// slice_scatter where the dim or the bounds are symbolic: src's length along `dim` is
// the slice's (the graph says so), and the start is normalized as a slice's.
std::vector<TensorIR> symbolic_slice_scatter(LowerCtx& ctx, const Node& n, int64_t dim, const Dim& start, int64_t step) {
  const TensorIR& self = ctx.tensor(n.args[0]);
  const TensorIR& src = ctx.tensor(n.args[1]);
  if (step <= 0) throw Unsupported("slice_scatter with a non-positive step");
  const Expr first = slice_start(start, self.sizes[dim]).expr();
  const Expr end = add(first, mul(src.sizes[dim].expr(), step));
  auto in_view = [dim, first, end, step](const std::vector<Expr>& idx) -> Expr {
    Expr i = idx[dim];
    Expr cond = both(cmp(ExprOp::Ge, i, first), cmp(ExprOp::Lt, i, end));
    if (step > 1) {
      Expr off = binary(ExprOp::Sub, i, first, DType::I64);
      cond = both(cond, cmp(ExprOp::Eq, binary(ExprOp::Mod, off, int_const(step), DType::I64), int_const(0)));
    }
    return cond;
  };
  auto view_index = [dim, first, step](const std::vector<Expr>& idx) {
    std::vector<Expr> s = idx;
    Expr off = binary(ExprOp::Sub, idx[dim], first, DType::I64);
    s[dim] = step > 1 ? binary(ExprOp::FloorDiv, off, int_const(step), DType::I64) : off;
    return s;
  };
  return scatter_into(ctx, n, in_view, view_index);
}

}  // namespace

void register_view_scatter_ops(LoweringTable& t) {
  t["aten.slice_scatter.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& self = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(arg_int_or(n, 2, 0), self.rank());
    const bool symbolic_end = n.args.size() > 4 && n.args[4].kind == Arg::Kind::Int && n.args[4].sym;
    const Dim start_arg = n.args.size() > 3 && !n.args[3].is_none() ? n.args[3].as_dim() : Dim(0);
    if (!self.sizes[dim].is_static() || !start_arg.is_static() || symbolic_end)
      return symbolic_slice_scatter(ctx, n, dim, start_arg, arg_int_or(n, 5, 1));
    require_static(ctx, n);
    int64_t size = self.sizes[dim].hint();
    int64_t start = arg_int_or(n, 3, 0), end = arg_int_or(n, 4, INT64_MAX), step = arg_int_or(n, 5, 1);
    if (step <= 0) throw Unsupported("slice_scatter with a non-positive step");
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, start, size);
    auto in_view = [dim, start, end, step, size](const std::vector<Expr>& idx) -> Expr {
      Expr i = idx[dim];
      Expr cond;
      if (start > 0) cond = both(cond, cmp(ExprOp::Ge, i, int_const(start)));
      if (end < size) cond = both(cond, cmp(ExprOp::Lt, i, int_const(end)));
      if (step > 1)
        cond = both(cond, cmp(ExprOp::Eq, binary(ExprOp::Mod, add(i, -start), int_const(step), DType::I64), int_const(0)));
      if (!cond && end <= start) return bool_const(false);
      return cond;
    };
    auto view_index = [dim, start, step](const std::vector<Expr>& idx) {
      std::vector<Expr> s = idx;
      Expr off = add(idx[dim], -start);
      s[dim] = step > 1 ? binary(ExprOp::FloorDiv, off, int_const(step), DType::I64) : off;
      return s;
    };
    return scatter_into(ctx, n, in_view, view_index);
  };
  t["aten.select_scatter.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static(ctx, n);
    const TensorIR& self = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(n.args[2].as_int(), self.rank());
    int64_t index = n.args[3].as_int();
    if (index < 0) index += self.sizes[dim].hint();
    if (index < 0 || index >= self.sizes[dim].hint()) throw Unsupported("select_scatter index out of range");
    auto in_view = [dim, index](const std::vector<Expr>& idx) -> Expr {
      return cmp(ExprOp::Eq, idx[dim], int_const(index));
    };
    auto view_index = [dim](const std::vector<Expr>& idx) {
      std::vector<Expr> s = idx;
      s.erase(s.begin() + dim);
      return s;
    };
    return scatter_into(ctx, n, in_view, view_index);
  };
  t["aten.diagonal_scatter.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static(ctx, n);
    const TensorIR& self = ctx.tensor(n.args[0]);
    int64_t offset = arg_int_or(n, 2, 0);
    int64_t d1 = normalize_dim(arg_int_or(n, 3, 0), self.rank());
    int64_t d2 = normalize_dim(arg_int_or(n, 4, 1), self.rank());
    if (d1 == d2) throw Unsupported("diagonal_scatter with equal dims");
    // Element (i1, i2) is on the diagonal when i2 - i1 == offset; its position
    // along the diagonal is min(i1, i2).
    auto in_view = [d1, d2, offset](const std::vector<Expr>& idx) -> Expr {
      return cmp(ExprOp::Eq, add(idx[d2], mul(idx[d1], -1)), int_const(offset));
    };
    auto view_index = [d1, d2, offset](const std::vector<Expr>& idx) {
      std::vector<Expr> s;
      for (size_t d = 0; d < idx.size(); ++d)
        if (static_cast<int64_t>(d) != d1 && static_cast<int64_t>(d) != d2) s.push_back(idx[d]);
      s.push_back(offset >= 0 ? idx[d1] : idx[d2]);
      return s;
    };
    return scatter_into(ctx, n, in_view, view_index);
  };
}

}  // namespace ember
