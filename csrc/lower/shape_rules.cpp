// Shape rules the lowerings share: dims normalized, sizes compared (symbols by their hints),
// broadcasting of shapes and of index lists. Declared in lower/lowering.h.
#include "lower/lowering.h"

#include <algorithm>

namespace ember {

int64_t normalize_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) throw Unsupported("dimension out of range");
  return dim < 0 ? dim + r : dim;
}

bool compatible(const Dim& a, const Dim& b) {
  return a == b || ((!a.is_static() || !b.is_static()) && a.hint() == b.hint());
}

bool compatible(const Dims& a, const Dims& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!compatible(a[i], b[i])) return false;
  return true;
}

Dim slice_start(const Dim& start, const Dim& size) {
  return start.hint() < 0 ? max(size + start, Dim(0)) : start;
}

Dims broadcast_shapes(const Dims& a, const Dims& b) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    Dim x = i < n - a.size() ? Dim(1) : a[i - (n - a.size())];
    Dim y = i < n - b.size() ? Dim(1) : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1 && !compatible(x, y)) throw Unsupported("shapes do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<Expr> broadcast_index(const std::vector<Expr>& idx, const Dims& from) {
  std::vector<Expr> out(from.size());
  size_t lead = idx.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) out[i] = from[i] == 1 ? int_const(0) : idx[lead + i];
  return out;
}

}  // namespace ember
