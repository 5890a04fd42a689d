#include "ir/symbolic_affine.h"

#include "ir/affine.h"

namespace ember {

namespace {

// Whether `e` is a size: integers, symbols and the ops size expressions are made of
// (canonical_size's), no loop var, no load.
bool is_size(const Expr& e) {
  switch (e->op) {
    case ExprOp::Const: return !is_float(e->dtype);
    case ExprOp::Sym: return true;
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::FloorDiv:
    case ExprOp::Mod:
    case ExprOp::Max:
    case ExprOp::Min:
      return !is_float(e->dtype) && is_size(e->args[0]) && is_size(e->args[1]);
    default: return false;
  }
}

void add_scaled(SymbolicAffine& into, const SymbolicAffine& f, const Dim& scale) {
  const Dim zero = int64_t{0};
  for (const auto& [v, c] : f.coef) {
    auto it = into.coef.find(v);
    Dim sum = (it == into.coef.end() ? zero : it->second) + c * scale;
    if (sum == zero) {
      if (it != into.coef.end()) into.coef.erase(it);
    } else {
      into.coef[v] = sum;
    }
  }
  into.constant = into.constant + f.constant * scale;
}

}  // namespace

std::optional<SymbolicAffine> symbolic_affine_form(const Expr& e) {
  if (is_size(e)) {
    SymbolicAffine f;
    f.constant = Dim::of(e, 0);  // equality only: the hint is never read
    return f;
  }
  switch (e->op) {
    case ExprOp::Var: {
      SymbolicAffine f;
      f.coef[static_cast<int>(e->ival)] = Dim(int64_t{1});
      return f;
    }
    default:
      return combined_affine_form<SymbolicAffine>(e, symbolic_affine_form, add_scaled);
  }
}

namespace {

bool multiple_of(const Expr& e, int64_t n) {
  switch (e->op) {
    case ExprOp::Const: return !is_float(e->dtype) && e->ival % n == 0;
    case ExprOp::Mul: return multiple_of(e->args[0], n) || multiple_of(e->args[1], n);
    case ExprOp::Add:
    case ExprOp::Sub: return multiple_of(e->args[0], n) && multiple_of(e->args[1], n);
    case ExprOp::Neg: return multiple_of(e->args[0], n);
    default: return false;
  }
}

}  // namespace

bool known_multiple(const Dim& d, int64_t n) { return d.is_static() ? d.hint() % n == 0 : multiple_of(d.expr(), n); }

}  // namespace ember
