// Affine views of index expressions whose coefficients may be sizes over the graph's
// symbols (docs/dynamic_shapes.md): sum(coef * var) + constant, every coefficient and
// the constant a Dim. affine_form (affine.h) is the static case.
#pragma once
#include <map>
#include <optional>

#include "ir/dim.h"
#include "ir/expr.h"

namespace ember {

struct SymbolicAffine {
  using Scalar = Dim;
  std::map<int, Dim> coef;  // var id -> coefficient (no zero entries)
  Dim constant = int64_t{0};
};

// The form of an i64 expression, or nullopt when it is not affine in its vars: a var
// times another, a var under a division, a select or a load (a gather). Sub-expressions
// without vars or loads are sizes (Dims, compared in canonical form).
std::optional<SymbolicAffine> symbolic_affine_form(const Expr& e);

// Whether `d` is a multiple of n (> 0) at every value of its symbols, as its form shows:
// a constant multiple, a product with such a factor, a sum or difference of such terms.
// False when it cannot tell (a floor division, a remainder, a max...).
bool known_multiple(const Dim& d, int64_t n);

}  // namespace ember
