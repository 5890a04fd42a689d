#include "ir/dim.h"

#include <stdexcept>

#include "ir/size_expr.h"

namespace ember {

namespace {

int64_t floor_div_int(int64_t a, int64_t b) {
  if (b == 0) throw std::invalid_argument("size expression divides by zero");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Dim combine(ExprOp op, const Dim& a, const Dim& b, int64_t hint) {
  if (a.is_static() && b.is_static()) return Dim(hint);
  return Dim::of(binary(op, a.expr(), b.expr(), DType::I64), hint);
}

}  // namespace

Dim Dim::of(const Expr& e, int64_t hint) {
  Expr c = canonical_size(e);
  if (c->op == ExprOp::Const) return Dim(c->ival);
  Dim d;
  d.hint_ = hint;
  d.expr_ = c;
  return d;
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_static() != b.is_static()) return false;
  if (a.is_static()) return a.hint_ == b.hint_;
  return equal(a.expr_, b.expr_);
}

Dim operator+(const Dim& a, const Dim& b) { return combine(ExprOp::Add, a, b, a.hint() + b.hint()); }
Dim operator-(const Dim& a, const Dim& b) { return combine(ExprOp::Sub, a, b, a.hint() - b.hint()); }
Dim operator*(const Dim& a, const Dim& b) {
  if (a == 1) return b;
  if (b == 1) return a;
  return combine(ExprOp::Mul, a, b, a.hint() * b.hint());
}

Dim floordiv(const Dim& a, const Dim& b) {
  if (b == 1) return a;
  return combine(ExprOp::FloorDiv, a, b, floor_div_int(a.hint(), b.hint()));
}
Dim mod(const Dim& a, const Dim& b) {
  return combine(ExprOp::Mod, a, b, a.hint() - floor_div_int(a.hint(), b.hint()) * b.hint());
}
Dim max(const Dim& a, const Dim& b) { return combine(ExprOp::Max, a, b, std::max(a.hint(), b.hint())); }
Dim min(const Dim& a, const Dim& b) { return combine(ExprOp::Min, a, b, std::min(a.hint(), b.hint())); }

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t numel(const Dims& sizes) { return product(sizes).hint(); }

Dim product(const Dims& d) {
  Dim n = 1;
  for (const Dim& x : d) n *= x;
  return n;
}

bool is_symbolic(const Dims& d) {
  for (const Dim& x : d)
    if (!x.is_static()) return true;
  return false;
}

Dims to_dims(const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); }

std::vector<int64_t> hints(const Dims& d) {
  std::vector<int64_t> r;
  r.reserve(d.size());
  for (const Dim& x : d) r.push_back(x.hint());
  return r;
}

std::optional<std::vector<int64_t>> values(const Dims& d) {
  if (is_symbolic(d)) return std::nullopt;
  return hints(d);
}

Dims contiguous_strides(const Dims& sizes) {
  Dims s(sizes.size());
  Dim acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    s[i] = acc;
    if (!(sizes[i] == 0)) acc *= sizes[i];
  }
  return s;
}

std::string print_dim(const Dim& d) { return d.is_static() ? std::to_string(d.hint()) : print_size(d.expr()); }

std::string print_dims(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + print_dim(d[i]);
  return s + "]";
}

int64_t eval_dim(const Dim& d, const std::vector<int64_t>& symbols) {
  return d.is_static() ? d.hint() : eval_size(d.expr(), symbols);
}

std::vector<int64_t> eval_dims(const Dims& d, const std::vector<int64_t>& symbols) {
  std::vector<int64_t> r;
  r.reserve(d.size());
  for (const Dim& x : d) r.push_back(eval_dim(x, symbols));
  return r;
}

}  // namespace ember
