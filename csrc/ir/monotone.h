// Monotonicity of an expression in the one load that varies along some index vars.
//
// A max-pool over a pointwise function of its input (BatchNorm + ReLU recomputed at
// each window read) takes the maximum of f(x) over the window. When f is monotone in
// x for fixed values of everything else (per-channel statistics), that maximum is
// max(f(max x), f(min x)): two evaluations of f per output instead of one per window
// element. This analysis finds such an f.
#pragma once
#include <optional>
#include <vector>

#include "ir/expr.h"

namespace ember {

struct MonotoneLoad {
  Expr load;        // the only Load in the expression whose index depends on the vars
  bool arithmetic;  // whether anything but casts lies between it and the root
};

// `e` as f(load): the single Load whose index depends on any of `vars`, when `e` uses it
// once, through ops each monotone (either direction) in that argument, and no other
// part of `e` depends on `vars`. Monotone ops: casts, Neg, Add, Sub, Mul and Max/Min by
// a value independent of the load, Div of the load by one, Where on an independent
// condition, and the increasing or decreasing transcendental functions (Exp, Log,
// Sqrt, Tanh, Sigmoid, Erf, ...); Max/Min propagate NaN and every one of these maps
// NaN to NaN, so a NaN in the window still reaches the result.
//
// One exception is the caller's to accept: an infinite factor (or a zero divisor) that
// meets a path value of exactly zero gives NaN at an element strictly inside the
// window's range, where the max over the two extremes gives an infinity.
std::optional<MonotoneLoad> monotone_load(const Expr& e, const std::vector<int>& vars);

}  // namespace ember
