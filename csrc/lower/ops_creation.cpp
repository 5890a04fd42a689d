// Tensors made from nothing: full, full_like, scalar_tensor, arange, empty.
// They are lazy constants (or index functions) that inline into their users.
#include "lower/ops_common.h"

namespace ember {

namespace {

std::vector<TensorIR> constant(LowerCtx& ctx, const Arg& value) {
  const TensorType& out = ctx.out_type();
  DType dt = out.dtype;
  Expr v = value.kind == Arg::Kind::Int && !is_float(dt) ? int_const(value.i, dt) : const_of(value.as_double(), dt);
  return {ctx.lazy(dt, out.dims(), [v](const std::vector<Expr>&) { return v; }, {})};
}

}  // namespace

void register_creation_ops(LoweringTable& t) {
  t["aten.full.default"] = [](LowerCtx& ctx, const Node& n) { return constant(ctx, n.args[1]); };
  t["aten.full_like.default"] = [](LowerCtx& ctx, const Node& n) { return constant(ctx, n.args[1]); };
  t["aten.scalar_tensor.default"] = [](LowerCtx& ctx, const Node& n) { return constant(ctx, n.args[0]); };
  // Uninitialized memory has no defined value; zeros are as good as any.
  auto empty = [](LowerCtx& ctx, const Node&) { return constant(ctx, Arg::of_int(0)); };
  t["aten.empty.memory_format"] = empty;
  t["aten.empty_strided.default"] = empty;
  t["aten.empty_like.default"] = empty;
  auto arange = [](LowerCtx& ctx, const Node& n) {
    double start = 0, step = 1;
    if (n.op == "aten.arange.default") {
      // (end) only
    } else {
      start = n.args[0].as_double();
      if (n.op == "aten.arange.start_step" && n.args.size() > 2 && n.args[2].is_number()) step = n.args[2].as_double();
    }
    const TensorType& out = ctx.out_type();
    DType dt = out.dtype;
    // For integer outputs ATen converts start and step to int64 first (truncating),
    // then computes start + i * step; the length comes from the float arguments.
    bool ints = !is_float(dt);
    return std::vector<TensorIR>{ctx.lazy(dt, out.dims(), [start, step, dt, ints](const std::vector<Expr>& idx) {
      if (ints) return cast(add(mul(idx[0], static_cast<int64_t>(step)), static_cast<int64_t>(start)), dt);
      // ATen computes start + i * step in double for float outputs.
      Expr i = cast(idx[0], DType::F64);
      return cast(op2(ExprOp::Add, const_of(start, DType::F64), op2(ExprOp::Mul, i, const_of(step, DType::F64))), dt);
    }, {})};
  };
  t["aten.arange.default"] = arange;
  t["aten.arange.start"] = arange;
  t["aten.arange.start_step"] = arange;
}

}  // namespace ember
