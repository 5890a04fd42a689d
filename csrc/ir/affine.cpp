#include "ir/affine.h"

namespace ember {

namespace {

void add_scaled(AffineForm& into, const AffineForm& f, int64_t scale) {
  for (const auto& [v, c] : f.coef) {
    int64_t& slot = into.coef[v];
    slot += c * scale;
    if (slot == 0) into.coef.erase(v);
  }
  into.constant += f.constant * scale;
}

}  // namespace

std::optional<AffineForm> affine_form(const Expr& e) {
  switch (e->op) {
    case ExprOp::Const: {
      if (is_float(e->dtype)) return std::nullopt;
      AffineForm f;
      f.constant = e->ival;
      return f;
    }
    case ExprOp::Var: {
      AffineForm f;
      f.coef[static_cast<int>(e->ival)] = 1;
      return f;
    }
    case ExprOp::Add:
    case ExprOp::Sub: {
      if (is_float(e->dtype)) return std::nullopt;
      auto a = affine_form(e->args[0]);
      auto b = affine_form(e->args[1]);
      if (!a || !b) return std::nullopt;
      add_scaled(*a, *b, e->op == ExprOp::Add ? 1 : -1);
      return a;
    }
    case ExprOp::Mul: {
      if (is_float(e->dtype)) return std::nullopt;
      auto a = affine_form(e->args[0]);
      auto b = affine_form(e->args[1]);
      if (!a || !b) return std::nullopt;
      if (a->coef.empty()) std::swap(a, b);
      if (!b->coef.empty()) return std::nullopt;  // product of two vars
      AffineForm f;
      add_scaled(f, *a, b->constant);
      return f;
    }
    case ExprOp::Cast:
      if (is_float(e->dtype) || is_float(e->args[0]->dtype) || e->dtype != DType::I64) return std::nullopt;
      return affine_form(e->args[0]);
    default:
      return std::nullopt;
  }
}

bool same_index(const Expr& a, const Expr& b) {
  auto fa = affine_form(a);
  auto fb = affine_form(b);
  if (fa && fb) return *fa == *fb;
  return equal(a, b);
}

}  // namespace ember
