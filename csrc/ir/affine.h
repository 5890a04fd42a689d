// Affine views of index expressions: sum(coef * var) + constant.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "ir/expr.h"

namespace ember {

struct AffineForm {
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

}  // namespace ember
