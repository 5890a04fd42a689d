#include "schedule/cuda/vector_access.h"

#include <algorithm>
#include <map>
#include <optional>

#include "ir/affine.h"
#include "ir/symbolic_affine.h"

namespace ember {

int vector_bytes(DType t, int lanes) {
  if (t != DType::F16 && t != DType::BF16 && t != DType::F32 && t != DType::I32) return 0;
  return static_cast<int>(dtype_size(t)) * lanes;
}

namespace {

using Range = std::pair<int64_t, int64_t>;

// The smallest and largest value of an index term over the vars' extents: vars,
// constants, sums and products by constants, and Max/Min (a pool's clamped window row).
std::optional<Range> term_range(const Expr& e, const std::unordered_map<int, int64_t>& extents) {
  if (is_float(e->dtype)) return std::nullopt;
  switch (e->op) {
    case ExprOp::Const:
      return Range{e->ival, e->ival};
    case ExprOp::Var: {
      auto it = extents.find(static_cast<int>(e->ival));
      if (it == extents.end()) return std::nullopt;
      return Range{0, it->second - 1};
    }
    case ExprOp::Cast:
      return is_float(e->args[0]->dtype) ? std::nullopt : term_range(e->args[0], extents);
    default:
      break;
  }
  if (e->args.size() != 2) return std::nullopt;
  auto a = term_range(e->args[0], extents), b = term_range(e->args[1], extents);
  if (!a || !b) return std::nullopt;
  switch (e->op) {
    case ExprOp::Add: return Range{a->first + b->first, a->second + b->second};
    case ExprOp::Sub: return Range{a->first - b->second, a->second - b->first};
    case ExprOp::Max: return Range{std::max(a->first, b->first), std::max(a->second, b->second)};
    case ExprOp::Min: return Range{std::min(a->first, b->first), std::min(a->second, b->second)};
    case ExprOp::Mul: {
      if (a->first != a->second && b->first != b->second) return std::nullopt;
      const int64_t c[4] = {a->first * b->first, a->first * b->second, a->second * b->first, a->second * b->second};
      return Range{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    default: return std::nullopt;
  }
}

// An index as constant + sum of coefficient x term, a term being a var or a
// subexpression that is not a sum or a product by a constant (a clamp).
struct Terms {
  int64_t constant = 0;
  std::map<int, int64_t> vars;
  std::vector<std::pair<Expr, int64_t>> other;
};

void split_terms(const Expr& e, int64_t scale, Terms& t) {
  switch (e->op) {
    case ExprOp::Const:
      if (!is_float(e->dtype)) {
        t.constant += scale * e->ival;
        return;
      }
      break;
    case ExprOp::Var:
      t.vars[static_cast<int>(e->ival)] += scale;
      return;
    case ExprOp::Add:
    case ExprOp::Sub:
      if (is_float(e->dtype)) break;
      split_terms(e->args[0], scale, t);
      split_terms(e->args[1], e->op == ExprOp::Add ? scale : -scale, t);
      return;
    case ExprOp::Mul:
      if (is_float(e->dtype)) break;
      if (e->args[1]->is_const()) return split_terms(e->args[0], scale * e->args[1]->ival, t);
      if (e->args[0]->is_const()) return split_terms(e->args[1], scale * e->args[0]->ival, t);
      break;
    case ExprOp::Cast:
      if (e->dtype == DType::I64 && !is_float(e->args[0]->dtype)) return split_terms(e->args[0], scale, t);
      break;
    default:
      break;
  }
  t.other.push_back({e, scale});
}

}  // namespace

bool vector_index(const Program& p, const Expr& index, int b, int v, int lanes,
                  const std::unordered_map<int, int64_t>& extents) {
  Terms t;
  split_terms(index, 1, t);
  auto it = t.vars.find(v);
  if (it == t.vars.end() || it->second != 1 || t.constant % lanes != 0) return false;
  int64_t first = t.constant, last = t.constant;
  auto add_range = [&](int64_t c, const Range& r) {
    first += std::min(c * r.first, c * r.second);
    last += std::max(c * r.first, c * r.second);
  };
  for (const auto& [var_id, c] : t.vars) {
    if (c == 0) continue;
    if (var_id != v && c % lanes != 0) return false;
    auto e = extents.find(var_id);
    if (e == extents.end()) return false;
    add_range(c, {0, e->second - 1});
  }
  for (const auto& [term, c] : t.other) {
    if (c % lanes != 0 || depends_on(term, v)) return false;
    auto r = term_range(term, extents);
    if (!r) return false;
    add_range(c, *r);
  }
  return first >= 0 && last < p.buffers[b].extent().hint();
}

bool symbolic_vector_index(const Expr& index, int v, int lanes) {
  auto f = symbolic_affine_form(index);
  if (!f) return false;
  auto it = f->coef.find(v);
  if (it == f->coef.end() || it->second != Dim(int64_t{1})) return false;
  if (!known_multiple(f->constant, lanes)) return false;
  for (const auto& [var_id, c] : f->coef)
    if (var_id != v && !known_multiple(c, lanes)) return false;
  return true;
}

void walk_guarded_loads(const Expr& e, bool guarded, const std::function<void(const Expr&, bool)>& f) {
  if (e->op == ExprOp::Load) f(e, guarded);
  for (size_t i = 0; i < e->args.size(); ++i) walk_guarded_loads(e->args[i], guarded || (e->op == ExprOp::Where && i > 0), f);
}

}  // namespace ember
