// Affine views of index expressions: sum(coef * var) + constant.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "ir/expr.h"

namespace ember {

struct AffineForm {
  using Scalar = int64_t;
  std::map<int, int64_t> coef;  // var id -> coefficient (no zero entries)
  int64_t constant = 0;
  int64_t coef_of(int var) const {
    auto it = coef.find(var);
    return it == coef.end() ? 0 : it->second;
  }
  bool operator==(const AffineForm& o) const { return coef == o.coef && constant == o.constant; }
};

// The affine form of an i64 expression, or nullopt if it is not affine
// (a data-dependent load, a division, a select...).
std::optional<AffineForm> affine_form(const Expr& e);

// Whether two index expressions address the same element for every value of
// their vars: equal affine forms, or structurally equal when not affine.
bool same_index(const Expr& a, const Expr& b);

// What affine_form and symbolic_affine_form (symbolic_affine.h) share: the form of a sum,
// difference, product by a var-free factor or i64 cast, from the forms `form_of` gives
// its operands, added by `add_scaled(into, f, scale)`; nullopt for any other op, or when
// it is not affine.
template <class Form, class FormOf, class AddScaled>
std::optional<Form> combined_affine_form(const Expr& e, const FormOf& form_of, const AddScaled& add_scaled) {
  using Scalar = typename Form::Scalar;
  switch (e->op) {
    case ExprOp::Add:
    case ExprOp::Sub: {
      if (is_float(e->dtype)) return std::nullopt;
      auto a = form_of(e->args[0]);
      auto b = form_of(e->args[1]);
      if (!a || !b) return std::nullopt;
      add_scaled(*a, *b, Scalar(int64_t{e->op == ExprOp::Add ? 1 : -1}));
      return a;
    }
    case ExprOp::Mul: {
      if (is_float(e->dtype)) return std::nullopt;
      auto a = form_of(e->args[0]);
      auto b = form_of(e->args[1]);
      if (!a || !b) return std::nullopt;
      if (a->coef.empty()) std::swap(a, b);
      if (!b->coef.empty()) return std::nullopt;  // product of two vars
      Form f;
      add_scaled(f, *a, b->constant);
      return f;
    }
    case ExprOp::Cast:
      if (is_float(e->dtype) || is_float(e->args[0]->dtype) || e->dtype != DType::I64) return std::nullopt;
      return form_of(e->args[0]);
    default:
      return std::nullopt;
  }
}

}  // namespace ember
