#pragma once
#include <cstdint>
#include <unordered_map>

#include "ir/expr.h"

namespace ember {

// Folds what the loop bounds decide: with each var v in [0, extents[v]),
// comparisons of affine index expressions against constants whose outcome the
// interval of the expression fixes become constants, and the logic and selects
// above them fold away. Removes the bounds tests of padding, pooling windows and
// cat where the shapes make them always true or always false. Clamps (min/max) the
// interval decides fold too, and an integer floor division or modulo of a non-negative
// value by a power of two becomes a shift or a mask.
Expr simplify_bounds(const Expr& e, const std::unordered_map<int, int64_t>& extents);

}  // namespace ember
