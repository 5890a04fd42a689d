// Dim: one size (or stride, or offset) of a tensor, static or symbolic.
//
// A static Dim is an integer. A symbolic Dim is a size expression over the graph's
// symbols (csrc/ir/size_expr.h) in canonical form, plus its hint: its value at the
// symbols' hints. Lowering, fusion and codegen work on Dims, so one compiled graph
// serves every size Dynamo's guards admit (docs/dynamic_shapes.md).
//
// Rules the rest of the compiler relies on:
// - Equality is exact: two Dims are equal when their canonical forms are (sums of
//   monomials; floor division, remainder, max and min as opaque factors after the
//   local rules of canonical_size). Unequal forms may still be equal for every
//   admitted size; callers treat "not equal" as "not known equal".
// - A symbolic size is never 0 or 1 (Dynamo specializes those sizes and guards the
//   broadcasts it traced), so `d == 1` answers "is this size 1". Where a symbolic
//   size might still be 1 at run time (size-oblivious symbols), treating it as a
//   real dim (a loop var, not the constant 0) stays correct, only slower. Symbols
//   bound to Python ints (dynamic=True makes int arguments symbolic) may take any
//   value: lowerings read them through Arg::as_dim, never as sizes of their own.
// - hint() is for heuristics only (costs, loop order, block sizes). A decision that
//   is correct only for some sizes must test is_static() and take the general path
//   otherwise.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace ember {

class Dim {
 public:
  Dim() = default;
  Dim(int64_t v) : hint_(v) {}  // NOLINT(google-explicit-constructor): a static size
  Dim(int v) : hint_(v) {}      // NOLINT(google-explicit-constructor)
  Dim(size_t v) : hint_(static_cast<int64_t>(v)) {}  // NOLINT(google-explicit-constructor)
  // A size expression with its hint; static when it folds to a constant.
  static Dim of(const Expr& e, int64_t hint);

  bool is_static() const { return expr_ == nullptr; }
  int64_t hint() const { return hint_; }
  std::optional<int64_t> value() const {
    return is_static() ? std::optional<int64_t>(hint_) : std::nullopt;
  }
  // The i64 Expr: a constant, or the canonical size expression.
  Expr expr() const { return expr_ ? expr_ : int_const(hint_); }

  friend bool operator==(const Dim& a, const Dim& b);
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }
  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  Dim& operator*=(const Dim& b) { return *this = *this * b; }
  Dim& operator+=(const Dim& b) { return *this = *this + b; }

 private:
  int64_t hint_ = 0;
  Expr expr_;  // null when static
};

using Dims = std::vector<Dim>;

// Python's floor division and remainder (a zero divisor: see eval_size).
Dim floordiv(const Dim& a, const Dim& b);
Dim mod(const Dim& a, const Dim& b);
Dim max(const Dim& a, const Dim& b);
Dim min(const Dim& a, const Dim& b);

Dim product(const Dims& d);
// The number of elements of these sizes (of Dims: at the hints).
int64_t numel(const std::vector<int64_t>& sizes);
int64_t numel(const Dims& sizes);
bool is_symbolic(const Dims& d);
Dims to_dims(const std::vector<int64_t>& v);
std::vector<int64_t> hints(const Dims& d);
// The values, or nullopt when any is symbolic.
std::optional<std::vector<int64_t>> values(const Dims& d);
// Contiguous strides for these sizes (size-1 dims get the stride of the next).
Dims contiguous_strides(const Dims& sizes);
// Text: "8" or the size expression ("s0*s1").
std::string print_dim(const Dim& d);
std::string print_dims(const Dims& d);  // "[4,s0]"
// The value of d for the given symbol values.
int64_t eval_dim(const Dim& d, const std::vector<int64_t>& symbols);
std::vector<int64_t> eval_dims(const Dims& d, const std::vector<int64_t>& symbols);

}  // namespace ember
