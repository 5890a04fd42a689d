#include "ir/monotone.h"

#include <algorithm>
#include <unordered_map>

namespace ember {

namespace {

bool monotone_unary(ExprOp op) {
  switch (op) {
    case ExprOp::Neg: case ExprOp::Exp: case ExprOp::Exp2: case ExprOp::Expm1: case ExprOp::Log:
    case ExprOp::Log2: case ExprOp::Log10: case ExprOp::Log1p: case ExprOp::Sqrt: case ExprOp::Tanh:
    case ExprOp::Sigmoid: case ExprOp::Erf: case ExprOp::Erfc: case ExprOp::Atan: case ExprOp::Asinh:
    case ExprOp::Sinh: case ExprOp::Floor: case ExprOp::Ceil: case ExprOp::Round: case ExprOp::Trunc:
      return true;
    default:
      return false;
  }
}

// Whether `op` is monotone in argument `i` when its other arguments are fixed.
bool monotone_in(const ExprNode& n, size_t i) {
  // To a float type: rounding is non-decreasing (integer narrowing wraps; excluded).
  if (n.op == ExprOp::Cast) return is_float(n.dtype) && !is_bool(n.args[0]->dtype);
  if (is_unary(n.op)) return monotone_unary(n.op);
  switch (n.op) {
    case ExprOp::Add: case ExprOp::Sub: case ExprOp::Mul: case ExprOp::Max: case ExprOp::Min:
      return is_float(n.dtype);
    case ExprOp::Div:
      return is_float(n.dtype) && i == 0;
    case ExprOp::Where:
      return i != 0;
    default:
      return false;
  }
}

enum class Kind { Invariant, Path, Bad };

struct Walk {
  const std::vector<int>& vars;
  std::unordered_map<const ExprNode*, Kind> memo;
  Expr load;
  bool arithmetic = false;

  bool varies(const Expr& e) const {
    return std::any_of(vars.begin(), vars.end(), [&](int v) { return depends_on(e, v); });
  }

  Kind visit(const Expr& e) {
    auto it = memo.find(e.get());
    if (it != memo.end()) {
      // A second use of the load's path (x * sigmoid(x)) is not monotone.
      return it->second == Kind::Invariant ? Kind::Invariant : Kind::Bad;
    }
    Kind k = classify(e);
    memo.emplace(e.get(), k);
    return k;
  }

  Kind classify(const Expr& e) {
    switch (e->op) {
      case ExprOp::Var:
        return std::find(vars.begin(), vars.end(), static_cast<int>(e->ival)) != vars.end() ? Kind::Bad
                                                                                         : Kind::Invariant;
      case ExprOp::Load:
        if (!varies(e->args[0])) return Kind::Invariant;
        if (load) return Kind::Bad;
        load = e;
        return Kind::Path;
      default:
        break;
    }
    int path = -1;
    for (size_t i = 0; i < e->args.size(); ++i) {
      Kind k = visit(e->args[i]);
      if (k == Kind::Bad) return Kind::Bad;
      if (k == Kind::Path) {
        if (path >= 0) return Kind::Bad;
        path = static_cast<int>(i);
      }
    }
    if (path < 0) return Kind::Invariant;
    if (!monotone_in(*e, static_cast<size_t>(path))) return Kind::Bad;
    if (e->op != ExprOp::Cast) arithmetic = true;
    return Kind::Path;
  }
};

}  // namespace

std::optional<MonotoneLoad> monotone_load(const Expr& e, const std::vector<int>& vars) {
  Walk w{vars, {}, nullptr, false};
  if (w.visit(e) != Kind::Path) return std::nullopt;
  return MonotoneLoad{w.load, w.arithmetic};
}

}  // namespace ember
