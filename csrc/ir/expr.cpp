#include "ir/expr.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

namespace ember {

namespace {

const char* const kOpNames[] = {
    "const", "var", "load", "sym",
    "neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "erf", "erfc", "sigmoid", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
    "isnan", "isinf", "isfinite", "not", "bitnot",
    "add", "sub", "mul", "div", "floordiv", "truncdiv", "mod", "fmod", "pow", "max", "min", "atan2",
    "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "bitand", "bitor", "bitxor",
    "shl", "shr",
    "where", "cast",
};

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t hash_double(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return std::hash<uint64_t>()(bits);
}

Expr make(ExprOp op, DType t, int64_t ival, double fval, std::vector<Expr> args) {
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  n->dtype = t;
  n->ival = ival;
  n->fval = fval;
  n->args = std::move(args);
  size_t h = mix(static_cast<size_t>(op), static_cast<size_t>(t));
  h = mix(h, std::hash<int64_t>()(ival));
  h = mix(h, hash_double(fval));
  for (const auto& a : n->args) h = mix(h, a->hash);
  n->hash = h;
  return n;
}

double round_to(double v, DType t) {
  if (t == DType::F32) return static_cast<float>(v);
  if (t == DType::F16 || t == DType::BF16) {
    // Round through f32 to the narrower type's mantissa (nearest-even).
    // Below the smallest normal the step is fixed (subnormals); past the largest
    // finite value the result is infinite (f16: 1e30 is inf, as eager rounds it).
    float f = static_cast<float>(v);
    if (std::isnan(f) || std::isinf(f)) return f;
    const bool half = t == DType::F16;
    const int mant_bits = half ? 10 : 7;
    const int min_exp = half ? -14 : -126;  // exponent of the smallest normal
    const double max_finite = half ? 65504.0 : 3.3895313892515355e38;
    double a = std::fabs(static_cast<double>(f));
    double r;
    if (a < std::ldexp(1.0, min_exp)) {
      double step = std::ldexp(1.0, min_exp - mant_bits);
      r = std::nearbyint(a / step) * step;
    } else {
      int e;
      double m = std::frexp(a, &e);
      double scale = std::ldexp(1.0, mant_bits + 1);
      r = std::ldexp(std::nearbyint(m * scale) / scale, e);
    }
    if (r > max_finite) r = INFINITY;
    return std::copysign(r, static_cast<double>(f));
  }
  return v;
}

bool is_int_like(DType t) { return !is_float(t); }

}  // namespace

const char* expr_op_name(ExprOp op) { return kOpNames[static_cast<int>(op)]; }
bool is_unary(ExprOp op) { return op >= ExprOp::Neg && op <= ExprOp::BitNot; }
bool is_binary(ExprOp op) { return op >= ExprOp::Add && op <= ExprOp::Shr; }
bool is_transcendental(ExprOp op) {
  switch (op) {
    case ExprOp::Exp: case ExprOp::Exp2: case ExprOp::Expm1: case ExprOp::Log: case ExprOp::Log2:
    case ExprOp::Log10: case ExprOp::Log1p: case ExprOp::Sin: case ExprOp::Cos: case ExprOp::Tan:
    case ExprOp::Asin: case ExprOp::Acos: case ExprOp::Atan: case ExprOp::Sinh: case ExprOp::Cosh:
    case ExprOp::Tanh: case ExprOp::Asinh: case ExprOp::Acosh: case ExprOp::Atanh: case ExprOp::Erf:
    case ExprOp::Erfc: case ExprOp::Sigmoid: case ExprOp::Pow: case ExprOp::Atan2:
      return true;
    default:
      return false;
  }
}

// A constant holds the value its dtype can hold: -3 as u8 is 253, as eager converts a
// Python int to an integer tensor's dtype (fuzz seed 370261: clamp(u8, -3, 1) is 1, and
// the simplifier must not read the bound as -3).
Expr int_const(int64_t v, DType t) {
  switch (t) {
    case DType::U8: v = static_cast<uint8_t>(v); break;
    case DType::I8: v = static_cast<int8_t>(v); break;
    case DType::I16: v = static_cast<int16_t>(v); break;
    case DType::I32: v = static_cast<int32_t>(v); break;
    default: break;
  }
  return make(ExprOp::Const, t, v, static_cast<double>(v), {});
}
Expr float_const(double v, DType t) { return make(ExprOp::Const, t, 0, round_to(v, t), {}); }
Expr bool_const(bool v) { return make(ExprOp::Const, DType::Bool, v ? 1 : 0, v ? 1.0 : 0.0, {}); }
Expr const_of(double v, DType t) {
  if (is_float(t)) return float_const(v, t);
  if (is_bool(t)) return bool_const(v != 0);
  return int_const(static_cast<int64_t>(v), t);
}
Expr var(int id) { return make(ExprOp::Var, DType::I64, id, 0, {}); }
Expr sym(int index) { return make(ExprOp::Sym, DType::I64, index, 0, {}); }
Expr load(int buffer, Expr index, DType t) { return make(ExprOp::Load, t, buffer, 0, {std::move(index)}); }
Expr unary(ExprOp op, Expr a, DType t) { return make(op, t, 0, 0, {std::move(a)}); }

Expr binary(ExprOp op, Expr a, Expr b, DType t) {
  // Fold integer constants: index arithmetic is built from these.
  if (a->is_const() && b->is_const() && is_int_like(t) && is_int_like(a->dtype) && is_int_like(b->dtype)) {
    int64_t x = a->ival, y = b->ival;
    switch (op) {
      case ExprOp::Add: return int_const(static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)), t);
      case ExprOp::Sub: return int_const(static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)), t);
      case ExprOp::Mul: return int_const(static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)), t);
      default: break;
    }
  }
  return make(op, t, 0, 0, {std::move(a), std::move(b)});
}

Expr where(Expr c, Expr a, Expr b) {
  if (c->is_const()) return c->ival ? a : b;
  if (equal(a, b)) return a;
  DType t = a->dtype;
  return make(ExprOp::Where, t, 0, 0, {std::move(c), std::move(a), std::move(b)});
}

Expr cast(Expr a, DType t) {
  if (a->dtype == t) return a;
  if (a->is_const()) {
    double v = is_float(a->dtype) ? a->fval : static_cast<double>(a->ival);
    if (is_float(t)) return float_const(v, t);
    if (is_bool(t)) return bool_const(v != 0);
    if (!is_float(a->dtype)) return int_const(a->ival, t);
    if (std::isfinite(v)) return int_const(static_cast<int64_t>(v), t);
  }
  // A round trip through f16/bf16 inside one expression keeps full precision.
  bool low = a->dtype == DType::F16 || a->dtype == DType::BF16;
  if (a->op == ExprOp::Cast && a->ival == 0 && low && a->args[0]->dtype == t) return a->args[0];
  return make(ExprOp::Cast, t, 0, 0, {std::move(a)});
}

Expr node_of(ExprOp op, DType t, int64_t ival, std::vector<Expr> args) {
  return make(op, t, ival, 0, std::move(args));
}

Expr rounding_cast(Expr a, DType t) {
  if (a->dtype == t || a->is_const()) return cast(std::move(a), t);
  return make(ExprOp::Cast, t, 1, 0, {std::move(a)});
}

Expr add(Expr a, Expr b) {
  if (a->is_int_const(0)) return b;
  if (b->is_int_const(0)) return a;
  // Keep constants on the right so that affine forms read "terms + offset".
  if (a->is_const() && !b->is_const()) std::swap(a, b);
  if (b->is_const() && a->op == ExprOp::Add && a->args[1]->is_const())
    return add(a->args[0], int_const(a->args[1]->ival + b->ival));
  return binary(ExprOp::Add, std::move(a), std::move(b), DType::I64);
}
Expr mul(Expr a, Expr b) {
  if (a->is_int_const(1)) return b;
  if (b->is_int_const(1)) return a;
  if (a->is_int_const(0) || b->is_int_const(0)) return int_const(0);
  if (a->is_const() && !b->is_const()) std::swap(a, b);
  return binary(ExprOp::Mul, std::move(a), std::move(b), DType::I64);
}
Expr add(Expr a, int64_t b) { return add(std::move(a), int_const(b)); }
Expr mul(Expr a, int64_t b) { return mul(std::move(a), int_const(b)); }

bool equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (a->hash != b->hash || a->op != b->op || a->dtype != b->dtype || a->ival != b->ival ||
      a->args.size() != b->args.size())
    return false;
  if (std::memcmp(&a->fval, &b->fval, sizeof(double)) != 0) return false;
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!equal(a->args[i], b->args[i])) return false;
  return true;
}

bool depends_on(const Expr& e, int var_id) {
  if (e->op == ExprOp::Var) return e->ival == var_id;
  for (const auto& a : e->args)
    if (depends_on(a, var_id)) return true;
  return false;
}

std::optional<int64_t> coefficient(const Expr& e, int var_id) {
  if (!depends_on(e, var_id)) return 0;
  switch (e->op) {
    case ExprOp::Var:
      return 1;
    case ExprOp::Add: {
      auto a = coefficient(e->args[0], var_id), b = coefficient(e->args[1], var_id);
      if (!a || !b) return std::nullopt;
      return *a + *b;
    }
    case ExprOp::Sub: {
      auto a = coefficient(e->args[0], var_id), b = coefficient(e->args[1], var_id);
      if (!a || !b) return std::nullopt;
      return *a - *b;
    }
    case ExprOp::Mul: {
      const Expr& x = e->args[0];
      const Expr& y = e->args[1];
      if (y->is_const() && !is_float(y->dtype)) {
        auto a = coefficient(x, var_id);
        if (!a) return std::nullopt;
        return *a * y->ival;
      }
      if (x->is_const() && !is_float(x->dtype)) {
        auto b = coefficient(y, var_id);
        if (!b) return std::nullopt;
        return *b * x->ival;
      }
      return std::nullopt;
    }
    case ExprOp::Cast:
      if (e->dtype == DType::I64 && !is_float(e->args[0]->dtype)) return coefficient(e->args[0], var_id);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

namespace {

struct Cost {
  int64_t nodes = 0;
  bool size = true;     // built of constants and symbols only
  bool symbol = false;  // with a symbol among them
};

Cost cost_of(const Expr& e) {
  if (e->op == ExprOp::Const) return {0, true, false};
  if (e->op == ExprOp::Sym) return {0, true, true};
  if (e->op == ExprOp::Var) return {0, false, false};
  Cost c{is_transcendental(e->op) ? 8 : 1, e->op != ExprOp::Load, false};
  for (const auto& a : e->args) {
    const Cost ac = cost_of(a);
    c.nodes += ac.nodes;
    c.size = c.size && ac.size;
    c.symbol = c.symbol || ac.symbol;
  }
  if (c.size && c.symbol) c.nodes = 0;  // what the constant it is at a call would cost
  return c;
}

}  // namespace

int64_t cost(const Expr& e) { return cost_of(e).nodes; }

void walk_loads(const Expr& e, const std::function<void(const Expr&)>& f) {
  if (e->op == ExprOp::Load) f(e);
  for (const auto& a : e->args) walk_loads(a, f);
}

std::vector<int> loaded_buffers(const Expr& e) {
  std::vector<int> out;
  std::unordered_set<int> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& x) {
    if (x->op == ExprOp::Load && seen.insert(static_cast<int>(x->ival)).second) out.push_back(static_cast<int>(x->ival));
    for (const auto& a : x->args) walk(a);
  };
  walk(e);
  return out;
}

namespace {

// e's op over new arguments, through the folding factories.
Expr rebuild(const Expr& e, std::vector<Expr> args) {
  switch (e->op) {
    case ExprOp::Add:
      if (e->dtype == DType::I64) return add(args[0], args[1]);
      break;
    case ExprOp::Mul:
      if (e->dtype == DType::I64) return mul(args[0], args[1]);
      break;
    case ExprOp::Where:
      return where(args[0], args[1], args[2]);
    case ExprOp::Cast:
      return e->ival ? rounding_cast(args[0], e->dtype) : cast(args[0], e->dtype);
    default:
      break;
  }
  if (is_binary(e->op)) return binary(e->op, args[0], args[1], e->dtype);
  return make(e->op, e->dtype, e->ival, e->fval, std::move(args));
}

}  // namespace

Expr substitute(const Expr& e, const std::unordered_map<int, Expr>& vars) {
  if (e->op == ExprOp::Var) {
    auto it = vars.find(static_cast<int>(e->ival));
    return it == vars.end() ? e : it->second;
  }
  if (e->args.empty()) return e;
  std::vector<Expr> args;
  bool changed = false;
  args.reserve(e->args.size());
  for (const auto& a : e->args) {
    args.push_back(substitute(a, vars));
    changed |= args.back() != a;
  }
  return changed ? rebuild(e, std::move(args)) : e;
}

Expr replace(const Expr& e, const ExprNode* from, const Expr& to) {
  std::unordered_map<const ExprNode*, Expr> done;
  std::function<Expr(const Expr&)> walk = [&](const Expr& x) -> Expr {
    if (x.get() == from) return to;
    if (x->args.empty()) return x;
    auto it = done.find(x.get());
    if (it != done.end()) return it->second;
    std::vector<Expr> args;
    bool changed = false;
    args.reserve(x->args.size());
    for (const auto& a : x->args) {
      args.push_back(walk(a));
      changed |= args.back() != a;
    }
    Expr out = changed ? rebuild(x, std::move(args)) : x;
    done.emplace(x.get(), out);
    return out;
  };
  return walk(e);
}

}  // namespace ember
