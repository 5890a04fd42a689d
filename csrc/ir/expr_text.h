// The text form of an Expr, as the program and schedule texts write it:
//
//   5  5:i32  2.0  2.0:f64  true  inf  -nan:bf16     constants (i64, f32, bool unmarked)
//   v3  o1  i0  s0                                    a Program var, a kernel's outer and
//                                                     inner loop vars, a graph symbol
//   buf3[index]                                       a Load (buf3[index]:f32 when its dtype
//                                                     is not the buffer's)
//   (a + b)  (a * b)  exp(a)  where(c, a, b)  ...     ops by their names (expr.cpp)
//   f32(x)  round_f16(x)                              a cast; a rounding cast (expr.h)
//
// Any other node whose dtype is not the one its operands give (bool for comparisons,
// IsNan/IsInf/IsFinite and logical ops; else the first value operand's) is followed by
// `:dtype`. With the buffers' dtypes, parse_expr(print_expr(e)) is e, node for node.
#pragma once
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/text_reader.h"

namespace ember {

// `buffer_dtypes` (per buffer id) lets Loads print without their dtype; without it they
// always do.
std::string print_expr(const Expr& e, const std::vector<DType>* buffer_dtypes = nullptr);
Expr parse_expr(TextReader& in, const std::vector<DType>& buffer_dtypes);

// A float as IR text: always a '.', an exponent, inf or nan, 17 significant digits.
std::string print_float(double v);

}  // namespace ember
