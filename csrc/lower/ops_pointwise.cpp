// Element-wise ATen ops: arithmetic, comparisons, logic, math functions,
// activations, casts and copies. Each becomes a lazy TensorIR (no kernel of its own).
#include <cmath>

#include "lower/ops_common.h"

namespace ember {

DType args_result_type(const LowerCtx& ctx, const std::vector<const Arg*>& args) {
  std::vector<Operand> ops;
  for (const Arg* a : args) {
    if (a->is_tensor()) {
      const TensorIR& t = ctx.tensor(*a);
      ops.push_back({t.dtype, t.sizes.empty() ? OperandKind::ZeroDim : OperandKind::Tensor});
    } else if (a->kind == Arg::Kind::Bool) {
      ops.push_back({DType::Bool, OperandKind::Scalar});
    } else if (a->kind == Arg::Kind::Int) {
      ops.push_back({DType::I64, OperandKind::Scalar});
    } else if (a->kind == Arg::Kind::Float) {
      ops.push_back({DType::F32, OperandKind::Scalar});
    } else {
      throw Unsupported("unexpected non-numeric argument");
    }
  }
  return result_type(ops.data(), static_cast<int>(ops.size()));
}

Expr arg_at(const LowerCtx& ctx, const Arg& a, const std::vector<Expr>& idx, DType t) {
  if (a.is_tensor()) {
    const TensorIR& v = ctx.tensor(a);
    return cast(v.fn(broadcast_index(idx, v.sizes)), t);
  }
  // A size expression (a SymInt scalar, such as avg_pool's backward dividing by H*W):
  // its value is computed from the symbols at run time.
  if (a.kind == Arg::Kind::Int && a.sym) return cast(a.as_dim().expr(), t);
  if (a.kind == Arg::Kind::Int && !is_float(t)) return int_const(a.i, t);
  return const_of(a.as_double(), t);
}

// ATen's CPU fast paths for a "scalar" operand (TensorIterator::is_scalar) take any
// operand that is one element of the iteration: a number, a 0-d tensor, or a tensor whose
// sizes are all 1 broadcast over the others (fuzz seed 366969: bf16 [1,1] divisor).
static bool one_element(const LowerCtx& ctx, const Arg& a) {
  if (!a.is_tensor()) return true;
  for (const Dim& d : ctx.tensor(a).sizes)
    if (d.value() != std::optional<int64_t>(1)) return false;
  return true;
}

TensorIR map_args(LowerCtx& ctx, std::vector<const Arg*> args, DType compute,
                  std::function<Expr(const std::vector<Expr>&)> f, Operands mode) {
  const TensorType& out = ctx.out_type();
  std::vector<const TensorIR*> inputs;
  Dims shape;
  for (const Arg* a : args) {
    if (!a->is_tensor()) continue;
    inputs.push_back(&ctx.tensor(*a));
    shape = broadcast_shapes(shape, inputs.back()->sizes);
  }
  if (!compatible(shape, out.dims())) throw Unsupported("result shape is not the broadcast of the inputs");
  const LowerCtx* cp = &ctx;
  std::vector<Arg> held;
  for (const Arg* a : args) held.push_back(*a);
  DType out_dtype = out.dtype;
  // Operands eager rounds to a reduced-precision common dtype before computing.
  std::vector<DType> via(held.size(), compute);
  if (compute != DType::Bool && args.size() > 1) {
    DType common = args_result_type(ctx, args);
    if (common == DType::F16 || common == DType::BF16) {
      for (size_t i = 0; i < held.size(); ++i) {
        const Arg& a = held[i];
        bool scalar = one_element(ctx, a);
        if (ctx.options().aten_cuda) {
          // ATen's CUDA kernels read a Python number (a CPU scalar) at opmath precision
          // and every device tensor, 0-d ones too, as the common dtype (GPU fuzz seeds
          // 8041, 9617: f16 x + 1e30 is x + 1e30 in f32, where rounding 1e30 gives inf).
          if (!a.is_tensor() && mode != Operands::Common) continue;
        } else if (mode == Operands::ExactScalarSecond && i == 1 && scalar) {
          continue;
        }
        if (!a.is_tensor() || ctx.tensor(a).dtype != common) via[i] = common;
      }
    }
  }
  TensorIR r = ctx.lazy(out_dtype, out.dims(), nullptr, {});
  for (const TensorIR* in : inputs)
    if (!in->view) r.origins.insert(r.origins.end(), in->origins.begin(), in->origins.end());
  r.fn = [cp, held, via, compute, f, out_dtype](const std::vector<Expr>& idx) {
    std::vector<Expr> vals;
    vals.reserve(held.size());
    for (size_t i = 0; i < held.size(); ++i) {
      const Arg& a = held[i];
      if (via[i] == compute) {
        vals.push_back(arg_at(*cp, a, idx, compute));
      } else if (a.is_tensor()) {  // one rounding, from the operand's own dtype
        Expr x = arg_at(*cp, a, idx, cp->tensor(a).dtype);
        vals.push_back(cast(rounding_cast(x, via[i]), compute));
      } else {
        vals.push_back(cast(arg_at(*cp, a, idx, via[i]), compute));  // a rounded constant
      }
    }
    return cast(f(vals), out_dtype);
  };
  return r;
}

namespace {

using V = std::vector<Expr>;

std::vector<TensorIR> one(TensorIR t) { return {std::move(t)}; }

// out = f(args...) computed in the output's compute type.
LowerFn arith(std::vector<int> arg_positions, std::function<Expr(const V&)> f, Operands mode = Operands::Common) {
  return [arg_positions, f, mode](LowerCtx& ctx, const Node& n) {
    std::vector<const Arg*> args;
    for (int p : arg_positions) args.push_back(&n.args.at(p));
    return one(map_args(ctx, args, compute_type(ctx.out_type().dtype), f, mode));
  };
}

// Comparisons and logic: operands promoted together, bool result.
LowerFn compare(ExprOp op) {
  return [op](LowerCtx& ctx, const Node& n) {
    std::vector<const Arg*> args = {&n.args.at(0), &n.args.at(1)};
    DType t = compute_type(args_result_type(ctx, args));
    return one(map_args(ctx, args, t, [op](const V& v) { return cmp(op, v[0], v[1]); }));
  };
}

LowerFn logical(ExprOp op) {
  return [op](LowerCtx& ctx, const Node& n) {
    std::vector<const Arg*> args = {&n.args.at(0), &n.args.at(1)};
    return one(map_args(ctx, args, DType::Bool, [op](const V& v) { return binary(op, v[0], v[1], DType::Bool); }));
  };
}

// Math functions: integer inputs are computed in the (float) output type.
LowerFn math1(ExprOp op) {
  return [op](LowerCtx& ctx, const Node& n) {
    DType t = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args.at(0)}, t, [op](const V& v) { return op1(op, v[0]); }));
  };
}

Expr sigmoid(Expr x) { return op1(ExprOp::Sigmoid, x); }

Expr gelu(Expr x, bool tanh_approx) {
  DType t = x->dtype;
  if (tanh_approx) {
    Expr inner = op2(ExprOp::Mul, c(0.7978845608028654, t),
                     op2(ExprOp::Add, x, op2(ExprOp::Mul, c(0.044715, t), op2(ExprOp::Mul, x, op2(ExprOp::Mul, x, x)))));
    return op2(ExprOp::Mul, op2(ExprOp::Mul, c(0.5, t), x), op2(ExprOp::Add, c(1, t), op1(ExprOp::Tanh, inner)));
  }
  return op2(ExprOp::Mul, op2(ExprOp::Mul, x, c(0.5, t)),
             op2(ExprOp::Add, c(1, t), op1(ExprOp::Erf, op2(ExprOp::Mul, x, c(0.70710678118654752440, t)))));
}

// pow with a constant exponent uses the same special cases as ATen, whose CPU kernel has
// no sqrt/rsqrt special case for f16: there pow(-inf, 0.5) is inf, not sqrt's NaN, and
// pow(-0.0, 0.5) is 0.0, not -0.0. (Its CUDA kernel has them in every dtype: the caller
// passes a storage type other than f16 there.)
Expr pow_scalar(Expr x, double e, DType storage) {
  DType t = x->dtype;
  if (e == 1) return x;
  if (e == 2) return op2(ExprOp::Mul, x, x);
  if (e == 3) return op2(ExprOp::Mul, op2(ExprOp::Mul, x, x), x);
  if (is_float(t)) {
    if (e == 0.5 && storage != DType::F16) return op1(ExprOp::Sqrt, x);
    if (e == -0.5 && storage != DType::F16) return op1(ExprOp::Rsqrt, x);
    if (e == -1) return op2(ExprOp::Div, c(1, t), x);
    if (e == -2) return op2(ExprOp::Div, c(1, t), op2(ExprOp::Mul, x, x));
  }
  return op2(ExprOp::Pow, x, c(e, t));
}

std::vector<TensorIR> clamp_impl(LowerCtx& ctx, const Node& n, const Arg* lo, const Arg* hi) {
  std::vector<const Arg*> args = {&n.args.at(0)};
  if (lo && !lo->is_none()) args.push_back(lo);
  if (hi && !hi->is_none()) args.push_back(hi);
  bool has_lo = lo && !lo->is_none(), has_hi = hi && !hi->is_none();
  DType t = compute_type(ctx.out_type().dtype);
  return one(map_args(ctx, args, t, [has_lo, has_hi](const V& v) {
    // ATen: min(max(x, lo), hi), propagating NaN from x.
    Expr x = v[0];
    size_t k = 1;
    if (has_lo) x = op2(ExprOp::Max, x, v[k++]);
    if (has_hi) x = op2(ExprOp::Min, x, v[k++]);
    return x;
  }));
}

std::vector<TensorIR> copy_to(LowerCtx& ctx, const Arg& src) {
  // Element-wise copy into the node's dtype (clone, _to_copy, lift_fresh_copy).
  // An explicit conversion to f16/bf16 rounds even inside a fused expression.
  DType t = ctx.out_type().dtype;
  return one(map_args(ctx, {&src}, compute_type(t), [t](const V& v) { return rounding_cast(v[0], t); }));
}

}  // namespace

void register_pointwise_ops(LoweringTable& t) {
  auto add_like = [](ExprOp op) {
    return [op](LowerCtx& ctx, const Node& n) {
      DType ct = compute_type(ctx.out_type().dtype);
      const Arg& alpha = n.args.size() > 2 ? n.args[2] : Arg::none();
      if (!alpha.is_none() && alpha.as_double() != 1) {
        Arg al = alpha;
        return one(map_args(ctx, {&n.args[0], &n.args[1], &al}, ct,
                            [op](const V& v) { return op2(op, v[0], op2(ExprOp::Mul, v[1], v[2])); },
                            Operands::ExactNumbersOnCuda));
      }
      return one(map_args(ctx, {&n.args[0], &n.args[1]}, ct, [op](const V& v) {
        if (is_bool(v[0]->dtype)) return binary(op == ExprOp::Add ? ExprOp::LogicalOr : ExprOp::LogicalXor, v[0], v[1], DType::Bool);
        return op2(op, v[0], v[1]);
      }, Operands::ExactNumbersOnCuda));
    };
  };
  t["aten.add.Tensor"] = add_like(ExprOp::Add);
  t["aten.add.Scalar"] = add_like(ExprOp::Add);
  t["aten.sub.Tensor"] = add_like(ExprOp::Sub);
  t["aten.sub.Scalar"] = add_like(ExprOp::Sub);
  t["aten.rsub.Scalar"] = [](LowerCtx& ctx, const Node& n) {
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[0], &n.args[1]}, ct, [](const V& v) { return op2(ExprOp::Sub, v[1], v[0]); },
                        Operands::ExactNumbersOnCuda));
  };
  t["aten.rsub.Tensor"] = t["aten.rsub.Scalar"];
  auto mul = [](const V& v) {
    if (is_bool(v[0]->dtype)) return binary(ExprOp::LogicalAnd, v[0], v[1], DType::Bool);
    return op2(ExprOp::Mul, v[0], v[1]);
  };
  t["aten.mul.Tensor"] = arith({0, 1}, mul, Operands::ExactScalarSecond);
  t["aten.mul.Scalar"] = arith({0, 1}, mul, Operands::ExactScalarSecond);
  auto div = [](LowerCtx& ctx, const Node& n) {
    DType out = ctx.out_type().dtype;
    DType ct = compute_type(out);
    std::string mode = n.args.size() > 2 && n.args[2].kind == Arg::Kind::Str ? n.args[2].s : "";
    // ATen's trunc division of f16/bf16 tensors rounds the quotient to that type
    // before truncating; with a scalar divisor it truncates the f32 quotient. On CUDA a
    // scalar divisor is a Python number only (a 0-d tensor on the device takes the
    // tensor path: GPU fuzz seeds 297, 11279), and true and trunc division by it
    // multiply by its reciprocal, computed in f32 (f64 for f64), as ATen's CUDA kernels.
    const bool cuda = ctx.options().aten_cuda;
    bool scalar_divisor = !n.args[1].is_tensor() || (!cuda && one_element(ctx, n.args[1]));
    DType round_to = (out == DType::F16 || out == DType::BF16) && !scalar_divisor ? out : ct;
    const bool by_reciprocal = cuda && !n.args[1].is_tensor() && is_float(ct) && mode != "floor";
    const double divisor = by_reciprocal ? n.args[1].as_double() : 1.0;
    return one(map_args(ctx, {&n.args[0], &n.args[1]}, ct, [mode, round_to, by_reciprocal, divisor](const V& v) {
      if (mode == "floor") return op2(ExprOp::FloorDiv, v[0], v[1]);
      if (!is_float(v[0]->dtype)) return op2(mode == "trunc" ? ExprOp::TruncDiv : ExprOp::Div, v[0], v[1]);
      if (by_reciprocal) {
        const DType t = v[0]->dtype;
        const double inv = t == DType::F64 ? 1.0 / divisor
                                           : static_cast<double>(1.0f / static_cast<float>(divisor));
        Expr q = op2(ExprOp::Mul, v[0], c(inv, t));
        return mode == "trunc" ? op1(ExprOp::Trunc, q) : q;
      }
      Expr q = op2(ExprOp::Div, v[0], v[1]);
      if (mode != "trunc") return q;
      return op1(ExprOp::Trunc, round_to == q->dtype ? q : cast(rounding_cast(q, round_to), q->dtype));
    }, Operands::ExactScalarSecond));
  };
  t["aten.div.Tensor"] = div;
  t["aten.true_divide.Tensor"] = div;  // an alias of div.Tensor
  t["aten.div.Scalar"] = div;
  t["aten.div.Tensor_mode"] = div;
  t["aten.div.Scalar_mode"] = div;
  auto floor_divide = arith({0, 1}, [](const V& v) { return op2(ExprOp::FloorDiv, v[0], v[1]); }, Operands::ExactScalarSecond);
  t["aten.floor_divide.default"] = floor_divide;
  t["aten.floor_divide.Scalar"] = floor_divide;
  t["aten.remainder.Tensor"] = arith({0, 1}, [](const V& v) { return op2(ExprOp::Mod, v[0], v[1]); });
  t["aten.remainder.Scalar"] = t["aten.remainder.Tensor"];
  t["aten.fmod.Tensor"] = arith({0, 1}, [](const V& v) { return op2(ExprOp::Fmod, v[0], v[1]); });
  t["aten.fmod.Scalar"] = t["aten.fmod.Tensor"];
  t["aten.atan2.default"] = arith({0, 1}, [](const V& v) { return op2(ExprOp::Atan2, v[0], v[1]); });
  t["aten.maximum.default"] = arith({0, 1}, [](const V& v) { return op2(ExprOp::Max, v[0], v[1]); });
  t["aten.minimum.default"] = arith({0, 1}, [](const V& v) { return op2(ExprOp::Min, v[0], v[1]); });

  t["aten.pow.Tensor_Scalar"] = [](LowerCtx& ctx, const Node& n) {
    DType ct = compute_type(ctx.out_type().dtype);
    if (!is_float(ct)) throw Unsupported("integer pow");
    double e = n.args[1].as_double();
    // ATen's CUDA pow has sqrt/rsqrt for +-0.5 in every dtype (GPU fuzz seeds 4462,
    // 10320: f16 pow(-inf, 0.5) is NaN there, inf on the CPU).
    DType out = ctx.options().aten_cuda ? DType::F32 : ctx.out_type().dtype;
    return one(map_args(ctx, {&n.args[0]}, ct, [e, out](const V& v) { return pow_scalar(v[0], e, out); }));
  };
  t["aten.pow.Tensor_Tensor"] = [](LowerCtx& ctx, const Node& n) {
    DType ct = compute_type(ctx.out_type().dtype);
    if (!is_float(ct)) throw Unsupported("integer pow");
    return one(map_args(ctx, {&n.args[0], &n.args[1]}, ct, [](const V& v) { return op2(ExprOp::Pow, v[0], v[1]); }));
  };
  t["aten.pow.Scalar"] = t["aten.pow.Tensor_Tensor"];

  const std::pair<const char*, ExprOp> math[] = {
      {"exp", ExprOp::Exp},     {"exp2", ExprOp::Exp2},   {"expm1", ExprOp::Expm1}, {"log", ExprOp::Log},
      {"log2", ExprOp::Log2},   {"log10", ExprOp::Log10}, {"log1p", ExprOp::Log1p}, {"sqrt", ExprOp::Sqrt},
      {"rsqrt", ExprOp::Rsqrt}, {"sin", ExprOp::Sin},     {"cos", ExprOp::Cos},     {"tan", ExprOp::Tan},
      {"asin", ExprOp::Asin},   {"acos", ExprOp::Acos},   {"atan", ExprOp::Atan},   {"sinh", ExprOp::Sinh},
      {"cosh", ExprOp::Cosh},   {"tanh", ExprOp::Tanh},   {"asinh", ExprOp::Asinh}, {"acosh", ExprOp::Acosh},
      {"atanh", ExprOp::Atanh}, {"erf", ExprOp::Erf},     {"erfc", ExprOp::Erfc},   {"sigmoid", ExprOp::Sigmoid},
      {"reciprocal", ExprOp::Reciprocal},
  };
  for (const auto& [name, op] : math) t[std::string("aten.") + name + ".default"] = math1(op);

  // Ops that keep integer types as they are.
  const std::pair<const char*, ExprOp> same_type[] = {
      {"neg", ExprOp::Neg}, {"abs", ExprOp::Abs}, {"floor", ExprOp::Floor}, {"ceil", ExprOp::Ceil},
      {"round", ExprOp::Round}, {"trunc", ExprOp::Trunc}, {"sign", ExprOp::Sign}, {"sgn", ExprOp::Sign},
      {"bitwise_not", ExprOp::BitNot},
  };
  for (const auto& [name, op] : same_type)
    t[std::string("aten.") + name + ".default"] = [op = op](LowerCtx& ctx, const Node& n) {
      DType ct = compute_type(ctx.out_type().dtype);
      return one(map_args(ctx, {&n.args[0]}, ct, [op](const V& v) {
        if (is_bool(v[0]->dtype) && op == ExprOp::BitNot) return unary(ExprOp::LogicalNot, v[0], DType::Bool);
        if (!is_float(v[0]->dtype) && (op == ExprOp::Floor || op == ExprOp::Ceil || op == ExprOp::Round || op == ExprOp::Trunc)) return v[0];
        return op1(op, v[0]);
      }));
    };

  auto predicate = [](ExprOp op) {
    return [op](LowerCtx& ctx, const Node& n) {
      DType in = compute_type(ctx.tensor(n.args[0]).dtype);
      return one(map_args(ctx, {&n.args[0]}, in, [op](const V& v) {
        if (!is_float(v[0]->dtype)) return bool_const(op == ExprOp::IsFinite);
        return unary(op, v[0], DType::Bool);
      }));
    };
  };
  t["aten.isnan.default"] = predicate(ExprOp::IsNan);
  t["aten.isinf.default"] = predicate(ExprOp::IsInf);
  t["aten.isfinite.default"] = predicate(ExprOp::IsFinite);
  t["aten.logical_not.default"] = [](LowerCtx& ctx, const Node& n) {
    return one(map_args(ctx, {&n.args[0]}, DType::Bool, [](const V& v) { return unary(ExprOp::LogicalNot, v[0], DType::Bool); }));
  };
  for (const auto& [name, op] : {std::pair<const char*, ExprOp>{"eq", ExprOp::Eq}, {"ne", ExprOp::Ne}, {"lt", ExprOp::Lt},
                                 {"le", ExprOp::Le}, {"gt", ExprOp::Gt}, {"ge", ExprOp::Ge}}) {
    t[std::string("aten.") + name + ".Tensor"] = compare(op);
    t[std::string("aten.") + name + ".Scalar"] = compare(op);
  }
  t["aten.logical_and.default"] = logical(ExprOp::LogicalAnd);
  t["aten.logical_or.default"] = logical(ExprOp::LogicalOr);
  t["aten.logical_xor.default"] = logical(ExprOp::LogicalXor);
  for (const auto& [name, op] : {std::pair<const char*, ExprOp>{"bitwise_and", ExprOp::BitAnd}, {"bitwise_or", ExprOp::BitOr},
                                 {"bitwise_xor", ExprOp::BitXor}}) {
    auto f = arith({0, 1}, [op = op](const V& v) {
      if (is_bool(v[0]->dtype)) {
        ExprOp l = op == ExprOp::BitAnd ? ExprOp::LogicalAnd : op == ExprOp::BitOr ? ExprOp::LogicalOr : ExprOp::LogicalXor;
        return binary(l, v[0], v[1], DType::Bool);
      }
      return op2(op, v[0], v[1]);
    });
    t[std::string("aten.") + name + ".Tensor"] = f;
    t[std::string("aten.") + name + ".Scalar"] = f;
  }

  t["aten.where.self"] = [](LowerCtx& ctx, const Node& n) {
    // Values promote together; the condition only broadcasts.
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[0], &n.args[1], &n.args[2]}, ct, [ct](const V& v) {
      return where(cast(v[0], DType::Bool), v[1], v[2]);
    }));
  };
  t["aten.where.ScalarSelf"] = t["aten.where.self"];
  t["aten.where.ScalarOther"] = t["aten.where.self"];
  t["aten.where.Scalar"] = t["aten.where.self"];
  t["aten.masked_fill.Scalar"] = [](LowerCtx& ctx, const Node& n) {
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[1], &n.args[2], &n.args[0]}, ct, [](const V& v) { return where(cast(v[0], DType::Bool), v[1], v[2]); }));
  };
  t["aten.masked_fill.Tensor"] = t["aten.masked_fill.Scalar"];

  t["aten.clamp.default"] = [](LowerCtx& ctx, const Node& n) {
    return clamp_impl(ctx, n, n.args.size() > 1 ? &n.args[1] : nullptr, n.args.size() > 2 ? &n.args[2] : nullptr);
  };
  t["aten.clamp.Tensor"] = t["aten.clamp.default"];
  t["aten.clamp_min.default"] = [](LowerCtx& ctx, const Node& n) { return clamp_impl(ctx, n, &n.args[1], nullptr); };
  t["aten.clamp_max.default"] = [](LowerCtx& ctx, const Node& n) { return clamp_impl(ctx, n, nullptr, &n.args[1]); };
  t["aten.hardtanh.default"] = t["aten.clamp.default"];

  // Activations.
  t["aten.relu.default"] = arith({0}, [](const V& v) {
    // max(x, 0) that keeps NaN, like ATen's clamp_min(0).
    return op2(ExprOp::Max, v[0], c(0, v[0]->dtype));
  });
  t["aten.gelu.default"] = [](LowerCtx& ctx, const Node& n) {
    bool tanh_approx = n.args.size() > 1 && n.args[1].kind == Arg::Kind::Str && n.args[1].s == "tanh";
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[0]}, ct, [tanh_approx](const V& v) { return gelu(v[0], tanh_approx); }));
  };
  t["aten.silu.default"] = arith({0}, [](const V& v) { return op2(ExprOp::Mul, v[0], sigmoid(v[0])); });
  t["aten.mish.default"] = arith({0}, [](const V& v) {
    DType t = v[0]->dtype;
    Expr sp = where(cmp(ExprOp::Gt, v[0], c(20, t)), v[0], op1(ExprOp::Log1p, op1(ExprOp::Exp, v[0])));
    return op2(ExprOp::Mul, v[0], op1(ExprOp::Tanh, sp));
  });
  t["aten.hardsigmoid.default"] = arith({0}, [](const V& v) {
    DType t = v[0]->dtype;
    return op2(ExprOp::Div, op2(ExprOp::Min, op2(ExprOp::Max, op2(ExprOp::Add, v[0], c(3, t)), c(0, t)), c(6, t)), c(6, t));
  });
  t["aten.hardswish.default"] = arith({0}, [](const V& v) {
    DType t = v[0]->dtype;
    Expr r6 = op2(ExprOp::Min, op2(ExprOp::Max, op2(ExprOp::Add, v[0], c(3, t)), c(0, t)), c(6, t));
    return op2(ExprOp::Div, op2(ExprOp::Mul, v[0], r6), c(6, t));
  });
  t["aten.leaky_relu.default"] = [](LowerCtx& ctx, const Node& n) {
    double slope = n.args.size() > 1 && !n.args[1].is_none() ? n.args[1].as_double() : 0.01;
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[0]}, ct, [slope](const V& v) {
      return where(cmp(ExprOp::Gt, v[0], c(0, v[0]->dtype)), v[0], op2(ExprOp::Mul, v[0], c(slope, v[0]->dtype)));
    }));
  };
  t["aten.elu.default"] = [](LowerCtx& ctx, const Node& n) {
    double alpha = n.args.size() > 1 ? n.args[1].as_double() : 1.0;
    double scale = n.args.size() > 2 ? n.args[2].as_double() : 1.0;
    double in_scale = n.args.size() > 3 ? n.args[3].as_double() : 1.0;
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[0]}, ct, [=](const V& v) {
      DType t = v[0]->dtype;
      Expr neg = op2(ExprOp::Mul, c(alpha, t), op1(ExprOp::Expm1, op2(ExprOp::Mul, v[0], c(in_scale, t))));
      return op2(ExprOp::Mul, c(scale, t), where(cmp(ExprOp::Gt, v[0], c(0, t)), v[0], neg));
    }));
  };
  t["aten.softplus.default"] = [](LowerCtx& ctx, const Node& n) {
    double beta = n.args.size() > 1 ? n.args[1].as_double() : 1.0;
    double threshold = n.args.size() > 2 ? n.args[2].as_double() : 20.0;
    DType ct = compute_type(ctx.out_type().dtype);
    return one(map_args(ctx, {&n.args[0]}, ct, [=](const V& v) {
      DType t = v[0]->dtype;
      Expr bx = op2(ExprOp::Mul, v[0], c(beta, t));
      return where(cmp(ExprOp::Gt, bx, c(threshold, t)), v[0],
                   op2(ExprOp::Div, op1(ExprOp::Log1p, op1(ExprOp::Exp, bx)), c(beta, t)));
    }));
  };

  // Copies and casts.
  t["aten.clone.default"] = [](LowerCtx& ctx, const Node& n) { return copy_to(ctx, n.args[0]); };
  t["aten.lift_fresh_copy.default"] = t["aten.clone.default"];
  t["aten._to_copy.default"] = t["aten.clone.default"];
  t["prims.convert_element_type.default"] = t["aten.clone.default"];
  t["aten.copy.default"] = [](LowerCtx& ctx, const Node& n) { return copy_to(ctx, n.args[1]); };
  t["aten.fill.Scalar"] = [](LowerCtx& ctx, const Node& n) { return copy_to(ctx, n.args[1]); };
  t["aten.nan_to_num.default"] = [](LowerCtx& ctx, const Node& n) {
    DType ct = compute_type(ctx.out_type().dtype);
    if (!is_float(ct)) return copy_to(ctx, n.args[0]);
    double big = ctx.out_type().dtype == DType::F64 ? 1.7976931348623157e308
                 : ctx.out_type().dtype == DType::F16 ? 65504.0
                 : ctx.out_type().dtype == DType::BF16 ? 3.3895313892515355e38 : 3.4028234663852886e38;
    double nan = n.args.size() > 1 && !n.args[1].is_none() ? n.args[1].as_double() : 0.0;
    double pos = n.args.size() > 2 && !n.args[2].is_none() ? n.args[2].as_double() : big;
    double neg = n.args.size() > 3 && !n.args[3].is_none() ? n.args[3].as_double() : -big;
    return one(map_args(ctx, {&n.args[0]}, ct, [=](const V& v) {
      DType t = v[0]->dtype;
      Expr x = where(unary(ExprOp::IsNan, v[0], DType::Bool), c(nan, t), v[0]);
      x = where(cmp(ExprOp::Eq, x, c(INFINITY, t)), c(pos, t), x);
      return where(cmp(ExprOp::Eq, x, c(-INFINITY, t)), c(neg, t), x);
    }));
  };
}

}  // namespace ember
