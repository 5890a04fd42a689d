// Size expressions: sizes Dynamo left symbolic, as i64 Exprs over Sym leaves.
//
// The graph text writes them infix (`s0*s1`, `(s0*s1)//4`, `max(1,s0)`); the loop
// IR uses the same Exprs, so a symbolic loop bound or stride needs no second
// language. docs/dynamic_shapes.md has the plan they serve.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace ember {

// The text form, parseable back by the graph parser (symbols print as s<index>).
std::string print_size(const Expr& e);
// The value for the given symbol values (hints, or the actual sizes of a call).
// Floor division and remainder are Python's; a zero divisor throws.
int64_t eval_size(const Expr& e, const std::vector<int64_t>& symbols);
// Whether e mentions a symbol.
bool is_symbolic(const Expr& e);
// The canonical form of a size expression: a sum of monomials with integer
// coefficients, in a fixed order. Floor division and remainder by a monomial that
// divides every term exactly fold ((4*s0)//4 = s0, (s0*s1)%s1 = 0); other floor
// divisions, remainders, max and min are opaque factors with canonical arguments.
// Two expressions with the same canonical form are equal for all symbol values.
Expr canonical_size(const Expr& e);

}  // namespace ember
