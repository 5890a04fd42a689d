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
    default:
      return combined_affine_form<AffineForm>(e, affine_form, add_scaled);
  }
}

bool same_index(const Expr& a, const Expr& b) {
  auto fa = affine_form(a);
  auto fb = affine_form(b);
  if (fa && fb) return *fa == *fb;
  return equal(a, b);
}

}  // namespace ember
