// Reductions: sum, mean, prod, amax/amin, max/min with indices, argmax/argmin,
// any/all, var/std/var_mean, linalg_vector_norm, and softmax/log_softmax as reductions plus pointwise.
// Each reduction becomes a ComputedBuffer; the pointwise work around it stays lazy
// so that fusion can put producers inside and consumers after the reduction loop.
#include <cmath>

#include "lower/ops_common.h"

namespace ember {

namespace {

std::vector<int64_t> reduce_dims(const Arg& dims, int64_t rank) {
  std::vector<int64_t> out;
  if (dims.is_none() || (dims.kind == Arg::Kind::List && dims.list.empty())) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims.as_ints()) out.push_back(normalize_dim(d, rank));
  return out;
}

// The keepdim=False view of a keepdim reduction result.
TensorIR squeeze_dims(LowerCtx& ctx, const TensorIR& t, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim || t.sizes.empty()) return t;
  StridedView v = *t.view;
  StridedView s{v.buffer, v.dtype, {}, {}, v.offset};
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    bool reduced = false;
    for (int64_t r : dims) reduced |= r == static_cast<int64_t>(d);
    if (reduced) continue;
    s.sizes.push_back(v.sizes[d]);
    s.strides.push_back(v.strides[d]);
  }
  return ctx.from_view(s);
}

// The keepdim=False form of a lazy keepdim value: index it with zeros at `dims`.
TensorIR squeeze_lazy(LowerCtx& ctx, const TensorIR& kd, const std::vector<int64_t>& dims) {
  auto reduced = [dims](size_t d) {
    for (int64_t x : dims)
      if (x == static_cast<int64_t>(d)) return true;
    return false;
  };
  Dims sizes;
  for (size_t d = 0; d < kd.sizes.size(); ++d)
    if (!reduced(d)) sizes.push_back(kd.sizes[d]);
  return ctx.lazy(kd.dtype, sizes, [kd, reduced](const std::vector<Expr>& idx) {
    std::vector<Expr> full;
    size_t k = 0;
    for (size_t d = 0; d < kd.sizes.size(); ++d) full.push_back(reduced(d) ? int_const(0) : idx[k++]);
    return kd.fn(full);
  }, {&kd});
}

DType acc_type(DType t) {
  if (is_float(t)) return t == DType::F64 ? DType::F64 : DType::F32;
  if (is_bool(t)) return DType::Bool;
  return DType::I64;
}

Dim count(const TensorIR& in, const std::vector<int64_t>& dims) {
  Dim n = 1;
  for (int64_t d : dims) n *= in.sizes.empty() ? Dim(1) : in.sizes[d];
  return n;
}

// A count as a number of type t: a constant, or computed from the symbols.
Expr count_value(const Dim& n, DType t) {
  return n.is_static() ? c(static_cast<double>(n.hint()), t) : cast(n.expr(), t);
}

// A lazy element-wise function of a stored tensor, shaped like it.
TensorIR map_stored(LowerCtx& ctx, const TensorIR& src, DType out, std::function<Expr(Expr)> f) {
  TensorIR r = ctx.lazy(out, src.sizes, [src, f, out](const std::vector<Expr>& idx) { return cast(f(src.fn(idx)), out); }, {&src});
  return r;
}

std::vector<TensorIR> sum_like(LowerCtx& ctx, const Node& n, ReduceOp op, bool mean) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  bool has_dims = n.op.find(".dim") != std::string::npos;
  Arg dims_arg = has_dims ? n.args.at(1) : Arg::none();
  bool keepdim = has_dims && n.args.size() > 2 && n.args[2].kind == Arg::Kind::Bool && n.args[2].b;
  if (op == ReduceOp::Prod && n.op == "aten.prod.dim_int") dims_arg = Arg::of_list({n.args[1]});
  std::vector<int64_t> dims = reduce_dims(dims_arg, in.rank());
  DType out = ctx.out_type().dtype;
  DType acc = acc_type(mean ? out : out);
  if (op == ReduceOp::Any || op == ReduceOp::All) acc = DType::Bool;
  TensorIR src = in;
  if (op == ReduceOp::Any || op == ReduceOp::All)
    src = map_stored(ctx, in, DType::Bool, [](Expr x) { return cast(x, DType::Bool); });
  TensorIR r = ctx.reduce(src, dims, op, mean ? acc : out, acc);
  if (mean) {
    Expr nelem = count_value(count(in, dims), acc);
    r = map_stored(ctx, r, out, [nelem](Expr x) { return op2(ExprOp::Div, x, nelem); });
    if (!keepdim) r = squeeze_lazy(ctx, r, dims);
    return {r};
  }
  return {squeeze_dims(ctx, r, dims, keepdim)};
}

// linalg_vector_norm: a reduction of |x|^p (max/min of |x| for +-inf, the count
// of non-zeros for 0), then the p-th root.
std::vector<TensorIR> vector_norm(LowerCtx& ctx, const Node& n) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  double p = n.args.size() > 1 && !n.args[1].is_none() ? n.args[1].as_double() : 2.0;
  std::vector<int64_t> dims = reduce_dims(n.args.size() > 2 ? n.args[2] : Arg::none(), in.rank());
  bool keepdim = n.args.size() > 3 && n.args[3].kind == Arg::Kind::Bool && n.args[3].b;
  DType out = ctx.out_type().dtype;
  if (!is_float(out)) throw Unsupported("vector_norm with a non-float result");
  DType acc = acc_type(out);
  TensorIR a = map_stored(ctx, in, acc, [acc](Expr x) { return op1(ExprOp::Abs, cast(x, acc)); });
  // Over one element every p-norm but p = 0 is |x|, as eager's CUDA kernels give it: as
  // the max, no square of x overflows (GPU fuzz seed 40519: |x| = 8.3e24, whose square
  // in f32 made the norm inf).
  bool one_element = true;  // a 0-d tensor's dims are [0] (or none) over no sizes
  for (int64_t d : dims) one_element = one_element && (in.sizes.empty() || (in.sizes[d].is_static() && in.sizes[d].hint() == 1));
  if (std::isinf(p) || (one_element && p != 0)) {
    TensorIR r = ctx.reduce(a, dims, p > 0 || one_element ? ReduceOp::Max : ReduceOp::Min, out, acc);
    return {squeeze_dims(ctx, r, dims, keepdim)};
  }
  TensorIR powered = a;
  if (p == 0) powered = map_stored(ctx, a, acc, [acc](Expr x) { return cast(cmp(ExprOp::Ne, x, c(0, acc)), acc); });
  else if (p == 2) powered = map_stored(ctx, a, acc, [](Expr x) { return op2(ExprOp::Mul, x, x); });
  else if (p != 1) powered = map_stored(ctx, a, acc, [p, acc](Expr x) { return op2(ExprOp::Pow, x, c(p, acc)); });
  TensorIR r = ctx.reduce(powered, dims, ReduceOp::Sum, acc, acc);
  r = map_stored(ctx, r, out, [p, acc](Expr x) {
    if (p == 0 || p == 1) return x;
    if (p == 2) return op1(ExprOp::Sqrt, x);
    return op2(ExprOp::Pow, x, c(1.0 / p, acc));
  });
  if (!keepdim) r = squeeze_lazy(ctx, r, dims);
  return {r};
}

std::vector<TensorIR> minmax(LowerCtx& ctx, const Node& n, ReduceOp op) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  std::vector<int64_t> dims = reduce_dims(n.args.size() > 1 ? n.args[1] : Arg::none(), in.rank());
  bool keepdim = n.args.size() > 2 && n.args[2].kind == Arg::Kind::Bool && n.args[2].b;
  DType out = ctx.out_type().dtype;
  TensorIR r = ctx.reduce(in, dims, op, out, compute_type(out));
  return {squeeze_dims(ctx, r, dims, keepdim)};
}

std::vector<TensorIR> arg_reduce(LowerCtx& ctx, const Node& n, ReduceOp op) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  bool keepdim = n.args.size() > 2 && n.args[2].kind == Arg::Kind::Bool && n.args[2].b;
  if (n.args.size() < 2 || n.args[1].is_none()) {
    // Over the flattened tensor: reduce over every dim, result is 0-d (or all-ones).
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < in.rank(); ++d) dims.push_back(d);
    TensorIR r = ctx.reduce(in, dims, op, DType::I64, DType::I64);
    return {squeeze_dims(ctx, r, dims, keepdim)};
  }
  std::vector<int64_t> dims = {normalize_dim(n.args[1].as_int(), in.rank())};
  if (in.sizes.empty()) dims.clear();
  TensorIR r = ctx.reduce(in, dims, op, DType::I64, DType::I64);
  return {squeeze_dims(ctx, r, dims, keepdim)};
}

// Values and indices along one dim (max.dim / min.dim).
std::vector<TensorIR> minmax_dim(LowerCtx& ctx, const Node& n, ReduceOp vop, ReduceOp iop) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  std::vector<int64_t> dims = {normalize_dim(n.args[1].as_int(), in.rank())};
  if (in.sizes.empty()) dims.clear();
  bool keepdim = n.args.size() > 2 && n.args[2].kind == Arg::Kind::Bool && n.args[2].b;
  DType out = ctx.out_type(0).dtype;
  TensorIR v = ctx.reduce(in, dims, vop, out, compute_type(out));
  TensorIR i = ctx.reduce(in, dims, iop, DType::I64, DType::I64);
  return {squeeze_dims(ctx, v, dims, keepdim), squeeze_dims(ctx, i, dims, keepdim)};
}

// var/std with a correction, and var_mean: two passes, a sum to the mean m = sum / n,
// then the sum of squared deviations d = x - m. var_mean's mean also sums d in the second
// pass and returns m + sum(d) / n (the correction of the corrected two-pass algorithm,
// Chan, Golub and LeVeque): sum / n is off by the rounding of a sum of values with a
// large common offset, and sum(d), a sum of values within the slice's spread, measures
// that error. layer_norm's decomposition subtracts this mean and multiplies by its
// weights: values near 139 (fuzz seed 80280) had a mean off by 1.3e-5 which, times
// weights of about 100, made errors 20x eager's, whose Welford mean has no offset error.
// (A shift by the slice's first element would need no second sum, but it reads the row
// at a second index, which keeps CUDA's row tiles from holding the row in registers.)
// The correction helps only where the offset is large against the spread: sum(d) has
// rounding errors of its own, on the scale of the spread, and they need not cancel.
// d = x - m rounds the same way for every integer x of a binade (no power-of-2 m
// cancels them), and the C loop's f32 vector lanes added that error 4099 times: fuzz
// seed 304781, integers in [-9, 9], a corrected mean off by 4.7e-7 where sum / n was
// off by 7e-9 (its cumsum of the layer_norm summed the offset 4099 times). So each
// slice keeps m + sum(d) / n only where m^2 > var (|m| above the standard deviation),
// else sum / n: a choice once a slice, from sums the kernel has anyway. (Accumulating
// in double also fixed the seed, at half the vector width: CPU LayerNorm 28% and
// BatchNorm's statistics 70% slower.)
std::vector<TensorIR> variance(LowerCtx& ctx, const Node& n, bool take_sqrt, bool with_mean) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  std::vector<int64_t> dims = reduce_dims(n.args.size() > 1 ? n.args[1] : Arg::none(), in.rank());
  double correction = 1;
  if (n.args.size() > 2 && !n.args[2].is_none()) correction = n.args[2].as_double();
  bool keepdim = n.args.size() > 3 && n.args[3].kind == Arg::Kind::Bool && n.args[3].b;
  DType out = ctx.out_type(0).dtype;
  if (!is_float(out)) throw Unsupported("variance of a non-float tensor");
  DType acc = acc_type(out);
  const Dim n_dim = count(in, dims);
  Expr nelem = count_value(n_dim, acc);
  TensorIR sum = ctx.reduce(in, dims, ReduceOp::Sum, acc, acc);
  TensorIR mean = map_stored(ctx, sum, acc, [nelem](Expr x) { return op2(ExprOp::Div, x, nelem); });
  Dims sizes = in.sizes;
  auto dev = [in, mean, acc](const std::vector<Expr>& idx) {
    return op2(ExprOp::Sub, cast(in.fn(idx), acc), mean.fn(broadcast_index(idx, mean.sizes)));
  };
  TensorIR dev2 = ctx.lazy(acc, sizes, [dev](const std::vector<Expr>& idx) {
    Expr d = dev(idx);
    return op2(ExprOp::Mul, d, d);
  }, {&in});
  TensorIR ss = ctx.reduce(dev2, dims, ReduceOp::Sum, acc, acc);
  Expr denom = n_dim.is_static() ? c(std::max(static_cast<double>(n_dim.hint()) - correction, 0.0), acc)
                                  : op2(ExprOp::Max, op2(ExprOp::Sub, nelem, c(correction, acc)), c(0, acc));
  TensorIR var = map_stored(ctx, ss, out, [denom, take_sqrt](Expr x) {
    Expr v = op2(ExprOp::Div, x, denom);
    return take_sqrt ? op1(ExprOp::Sqrt, v) : v;
  });
  // A slice of one element keeps m: var_mean([inf]) is (NaN, inf) in eager. In larger
  // slices an infinity makes the corrected mean NaN, as eager's Welford mean is.
  if (with_mean && (!n_dim.is_static() || n_dim.hint() > 1)) {
    TensorIR dev1 = ctx.lazy(acc, sizes, dev, {&in});
    TensorIR s1 = ctx.reduce(dev1, dims, ReduceOp::Sum, acc, acc);
    TensorIR m = mean;
    mean = ctx.lazy(acc, m.sizes, [m, s1, ss, nelem](const std::vector<Expr>& idx) {
      Expr mv = m.fn(idx);
      Expr offset = binary(ExprOp::Gt, op2(ExprOp::Mul, op2(ExprOp::Mul, mv, mv), nelem), ss.fn(idx), DType::Bool);
      return where(offset, op2(ExprOp::Add, mv, op2(ExprOp::Div, s1.fn(idx), nelem)), mv);
    }, {&m, &s1, &ss});
  }
  auto squeeze = [&](const TensorIR& kd) { return keepdim || kd.sizes.empty() ? kd : squeeze_lazy(ctx, kd, dims); };
  std::vector<TensorIR> outs = {squeeze(var)};
  if (with_mean) {
    // Eager's var_mean runs Welford's algorithm, whose mean is NaN once an infinity
    // meets any other element (inf - inf), where sum / n would be the infinity. The
    // squared deviations are NaN exactly when the slice holds an infinity or a NaN.
    // A symbolic count is at least 2 (Dynamo specializes sizes 0 and 1).
    const bool several = !n_dim.is_static() || n_dim.hint() > 1;
    TensorIR m = ctx.lazy(out, mean.sizes, [mean, ss, several, acc, out](const std::vector<Expr>& idx) {
      Expr mv = mean.fn(idx);
      if (several) mv = where(unary(ExprOp::IsNan, ss.fn(idx), DType::Bool), c(NAN, acc), mv);
      return cast(mv, out);
    }, {&mean, &ss});
    outs.push_back(squeeze(m));
  }
  return outs;
}

std::vector<TensorIR> softmax(LowerCtx& ctx, const Node& n, bool log) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  std::vector<int64_t> dims = {normalize_dim(n.args[1].as_int(), in.rank())};
  if (in.sizes.empty()) dims.clear();
  DType out = ctx.out_type().dtype;
  DType acc = acc_type(out);
  TensorIR mx = ctx.reduce(in, dims, ReduceOp::Max, acc, acc);
  auto shifted = [in, mx, acc](const std::vector<Expr>& idx) {
    Expr m = mx.fn(broadcast_index(idx, mx.sizes));
    // An all -inf row has max -inf; subtracting it would give NaN where eager gives
    // NaN too (exp(-inf - -inf)), so no special case is needed.
    // x - max is never above 0, but a fused input is recomputed in each stage, and
    // the C compiler may vectorize one stage (libmvec's exp) and not another (libm's):
    // one ulp of exp(171) is 4e58, whose exp is inf, and softmax gave inf/inf = NaN
    // (fuzz seed 18074). The NaN-propagating min keeps the shift at or below 0.
    return op2(ExprOp::Min, op2(ExprOp::Sub, cast(in.fn(idx), acc), m), c(0, acc));
  };
  TensorIR e = ctx.lazy(acc, in.sizes, [shifted](const std::vector<Expr>& idx) { return op1(ExprOp::Exp, shifted(idx)); }, {&in});
  TensorIR sum = ctx.reduce(e, dims, ReduceOp::Sum, acc, acc);
  // ATen's CPU kernel scales each row by 1 / sum, its CUDA epilogue divides by the sum:
  // the same rounding as eager's, and on the CPU one division a row instead of one an
  // element (a vector division costs ~10x a multiplication).
  const bool by_reciprocal = !ctx.options().aten_cuda;
  TensorIR r = ctx.lazy(out, in.sizes, [shifted, sum, log, out, by_reciprocal](const std::vector<Expr>& idx) {
    Expr s = sum.fn(broadcast_index(idx, sum.sizes));
    Expr x = shifted(idx);
    Expr e = log ? Expr() : op1(ExprOp::Exp, x);
    Expr v = log ? op2(ExprOp::Sub, x, op1(ExprOp::Log, s))
                 : by_reciprocal ? op2(ExprOp::Mul, e, op1(ExprOp::Reciprocal, s)) : op2(ExprOp::Div, e, s);
    return cast(v, out);
  }, {&in});
  return {r};
}

std::vector<TensorIR> cumulative(LowerCtx& ctx, const Node& n, ReduceOp op) {
  const TensorIR& in = ctx.tensor(n.args[0]);
  int64_t dim = normalize_dim(n.args[1].as_int(), in.rank());
  DType out = ctx.out_type().dtype;
  if (in.rank() == 0 || in.sizes[dim] == 1)  // a scan over one element is the element
    return {ctx.lazy(out, in.sizes, [in, out](const std::vector<Expr>& idx) { return cast(in.fn(idx), out); }, {&in})};
  // Eager's cumsum/cumprod accumulate in at::acc_type<T, /*cuda=*/false>: double for
  // f32 and f64, float for f16 and bf16. That decides overflow, underflow and
  // cancellation: [1e8, 1, -1e8] sums to 1 in f32, not 0.
  // ATen's CUDA logcumsumexp accumulates in at::acc_type<T, /*cuda=*/true> (float for
  // f32): a double exp and log1p a step would cost more than the scan's memory traffic.
  const bool wide = out == DType::F64 || (out == DType::F32 && !(op == ReduceOp::LogSumExp && ctx.options().aten_cuda));
  DType acc = wide ? DType::F64 : acc_type(out);
  return {ctx.scan(in, dim, op, out, acc)};
}

}  // namespace

void register_reduction_ops(LoweringTable& t) {
  t["aten.cumsum.default"] = [](LowerCtx& ctx, const Node& n) { return cumulative(ctx, n, ReduceOp::Sum); };
  t["aten.linalg_vector_norm.default"] = vector_norm;
  t["aten.cumprod.default"] = [](LowerCtx& ctx, const Node& n) { return cumulative(ctx, n, ReduceOp::Prod); };
  t["aten.logcumsumexp.default"] = [](LowerCtx& ctx, const Node& n) {
    if (!is_float(ctx.out_type().dtype)) throw Unsupported("logcumsumexp of a non-float tensor");
    return cumulative(ctx, n, ReduceOp::LogSumExp);
  };

  auto sum = [](LowerCtx& ctx, const Node& n) { return sum_like(ctx, n, ReduceOp::Sum, false); };
  t["aten.sum.dim_IntList"] = sum;
  t["aten.sum.default"] = sum;
  auto mean = [](LowerCtx& ctx, const Node& n) {
    if (!is_float(ctx.out_type().dtype)) throw Unsupported("mean of a non-float tensor");
    return sum_like(ctx, n, ReduceOp::Sum, true);
  };
  t["aten.mean.dim"] = mean;
  t["aten.mean.default"] = mean;
  auto prod = [](LowerCtx& ctx, const Node& n) { return sum_like(ctx, n, ReduceOp::Prod, false); };
  t["aten.prod.dim_int"] = prod;
  t["aten.prod.default"] = prod;
  t["aten.any.dim"] = [](LowerCtx& ctx, const Node& n) {
    Node m = n;
    m.args[1] = Arg::of_list({n.args[1]});
    return sum_like(ctx, m, ReduceOp::Any, false);
  };
  t["aten.any.dims"] = [](LowerCtx& ctx, const Node& n) { return sum_like(ctx, n, ReduceOp::Any, false); };
  t["aten.any.default"] = [](LowerCtx& ctx, const Node& n) { return sum_like(ctx, n, ReduceOp::Any, false); };
  t["aten.all.dim"] = [](LowerCtx& ctx, const Node& n) {
    Node m = n;
    m.args[1] = Arg::of_list({n.args[1]});
    return sum_like(ctx, m, ReduceOp::All, false);
  };
  t["aten.all.dims"] = [](LowerCtx& ctx, const Node& n) { return sum_like(ctx, n, ReduceOp::All, false); };
  t["aten.all.default"] = [](LowerCtx& ctx, const Node& n) { return sum_like(ctx, n, ReduceOp::All, false); };
  t["aten.amax.default"] = [](LowerCtx& ctx, const Node& n) { return minmax(ctx, n, ReduceOp::Max); };
  t["aten.amin.default"] = [](LowerCtx& ctx, const Node& n) { return minmax(ctx, n, ReduceOp::Min); };
  t["aten.max.default"] = [](LowerCtx& ctx, const Node& n) {
    Node m = n;
    m.args.resize(1);
    return minmax(ctx, m, ReduceOp::Max);
  };
  t["aten.min.default"] = [](LowerCtx& ctx, const Node& n) {
    Node m = n;
    m.args.resize(1);
    return minmax(ctx, m, ReduceOp::Min);
  };
  t["aten.max.dim"] = [](LowerCtx& ctx, const Node& n) { return minmax_dim(ctx, n, ReduceOp::Max, ReduceOp::ArgMax); };
  t["aten.min.dim"] = [](LowerCtx& ctx, const Node& n) { return minmax_dim(ctx, n, ReduceOp::Min, ReduceOp::ArgMin); };
  t["aten.argmax.default"] = [](LowerCtx& ctx, const Node& n) { return arg_reduce(ctx, n, ReduceOp::ArgMax); };
  t["aten.argmin.default"] = [](LowerCtx& ctx, const Node& n) { return arg_reduce(ctx, n, ReduceOp::ArgMin); };
  t["aten.var.correction"] = [](LowerCtx& ctx, const Node& n) { return variance(ctx, n, false, false); };
  t["aten.std.correction"] = [](LowerCtx& ctx, const Node& n) { return variance(ctx, n, true, false); };
  t["aten.var_mean.correction"] = [](LowerCtx& ctx, const Node& n) { return variance(ctx, n, false, true); };
  t["aten._softmax.default"] = [](LowerCtx& ctx, const Node& n) { return softmax(ctx, n, false); };
  t["aten._log_softmax.default"] = [](LowerCtx& ctx, const Node& n) { return softmax(ctx, n, true); };
}

}  // namespace ember
