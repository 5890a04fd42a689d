#include "ir/size_expr.h"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>

namespace ember {

namespace {

int precedence(ExprOp op) {
  switch (op) {
    case ExprOp::Add: case ExprOp::Sub: return 1;
    case ExprOp::Mul: case ExprOp::FloorDiv: case ExprOp::Mod: return 2;
    default: return 3;
  }
}

std::string print_at(const Expr& e, int outer) {
  std::string s;
  switch (e->op) {
    case ExprOp::Const: s = std::to_string(e->ival); break;
    case ExprOp::Sym: s = "s" + std::to_string(e->ival); break;
    case ExprOp::Max: case ExprOp::Min:
      return std::string(e->op == ExprOp::Max ? "max(" : "min(") + print_at(e->args[0], 0) + ", " +
             print_at(e->args[1], 0) + ")";
    case ExprOp::Add: case ExprOp::Sub: case ExprOp::Mul: case ExprOp::FloorDiv: case ExprOp::Mod: {
      const char* sym = e->op == ExprOp::Add ? "+" : e->op == ExprOp::Sub ? "-" : e->op == ExprOp::Mul ? "*"
                        : e->op == ExprOp::FloorDiv ? "//" : "%";
      int p = precedence(e->op);
      // Left-associative: the right operand needs parentheses at equal precedence.
      s = print_at(e->args[0], p) + sym + print_at(e->args[1], p + 1);
      return p < outer ? "(" + s + ")" : s;
    }
    default:
      throw std::invalid_argument(std::string("not a size expression: ") + expr_op_name(e->op));
  }
  // A negative constant is a unary minus: parenthesize it inside products.
  return (e->op == ExprOp::Const && e->ival < 0 && outer > 1) ? "(" + s + ")" : s;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

std::string print_size(const Expr& e) { return print_at(e, 0); }

int64_t eval_size(const Expr& e, const std::vector<int64_t>& symbols) {
  switch (e->op) {
    case ExprOp::Const: return e->ival;
    case ExprOp::Sym: return symbols.at(static_cast<size_t>(e->ival));
    default: break;
  }
  if (e->args.size() != 2) throw std::invalid_argument(std::string("not a size expression: ") + expr_op_name(e->op));
  int64_t a = eval_size(e->args[0], symbols), b = eval_size(e->args[1], symbols);
  switch (e->op) {
    case ExprOp::Add: return a + b;
    case ExprOp::Sub: return a - b;
    case ExprOp::Mul: return a * b;
    case ExprOp::Max: return a > b ? a : b;
    case ExprOp::Min: return a < b ? a : b;
    case ExprOp::FloorDiv:
    case ExprOp::Mod: {
      if (b == 0) throw std::invalid_argument("size expression divides by zero");
      int64_t q = floor_div(a, b);
      return e->op == ExprOp::FloorDiv ? q : a - q * b;
    }
    default:
      throw std::invalid_argument(std::string("not a size expression: ") + expr_op_name(e->op));
  }
}

bool is_symbolic(const Expr& e) {
  if (e->op == ExprOp::Sym) return true;
  for (const auto& a : e->args)
    if (is_symbolic(a)) return true;
  return false;
}

}  // namespace ember

// ---- canonical form ----------------------------------------------------------

namespace ember {

namespace {

// A monomial: opaque factors (symbols, or floor divisions etc.) sorted by their
// text; a polynomial maps each monomial to its coefficient (no zero entries).
struct Monomial {
  std::vector<std::string> keys;
  std::vector<Expr> atoms;
  bool operator<(const Monomial& o) const { return keys < o.keys; }
  bool operator==(const Monomial& o) const { return keys == o.keys; }
};
using Poly = std::map<Monomial, int64_t>;

Poly constant_poly(int64_t c) {
  Poly p;
  if (c != 0) p[Monomial{}] = c;
  return p;
}

void add_term(Poly& p, const Monomial& m, int64_t c) {
  int64_t& slot = p[m];
  slot += c;
  if (slot == 0) p.erase(m);
}

Poly add_poly(const Poly& a, const Poly& b, int64_t sign) {
  Poly r = a;
  for (const auto& [m, c] : b) add_term(r, m, sign * c);
  return r;
}

Monomial mul_monomial(const Monomial& a, const Monomial& b) {
  std::vector<std::pair<std::string, Expr>> all;
  for (size_t i = 0; i < a.keys.size(); ++i) all.push_back({a.keys[i], a.atoms[i]});
  for (size_t i = 0; i < b.keys.size(); ++i) all.push_back({b.keys[i], b.atoms[i]});
  std::stable_sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  Monomial m;
  for (auto& [k, e] : all) {
    m.keys.push_back(k);
    m.atoms.push_back(e);
  }
  return m;
}

Poly mul_poly(const Poly& a, const Poly& b) {
  Poly r;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) add_term(r, mul_monomial(ma, mb), ca * cb);
  return r;
}

// m / d when d's factors are a sub-multiset of m's.
std::optional<Monomial> divide_monomial(const Monomial& m, const Monomial& d) {
  Monomial r = m;
  for (const auto& k : d.keys) {
    auto it = std::find(r.keys.begin(), r.keys.end(), k);
    if (it == r.keys.end()) return std::nullopt;
    size_t i = static_cast<size_t>(it - r.keys.begin());
    r.keys.erase(it);
    r.atoms.erase(r.atoms.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return r;
}

// a / b when b is one term that divides every term of a exactly.
std::optional<Poly> exact_quotient(const Poly& a, const Poly& b) {
  if (b.size() != 1) return std::nullopt;
  const auto& [bm, bc] = *b.begin();
  Poly r;
  for (const auto& [m, c] : a) {
    if (c % bc != 0) return std::nullopt;
    auto q = divide_monomial(m, bm);
    if (!q) return std::nullopt;
    add_term(r, *q, c / bc);
  }
  return r;
}

std::optional<int64_t> as_constant(const Poly& p) {
  if (p.empty()) return 0;
  if (p.size() == 1 && p.begin()->first.keys.empty()) return p.begin()->second;
  return std::nullopt;
}

Expr from_poly(const Poly& p) {
  Expr sum;
  int64_t constant = 0;
  for (const auto& [m, c] : p) {
    if (m.keys.empty()) {
      constant = c;
      continue;
    }
    Expr term;
    for (const auto& a : m.atoms) term = term ? binary(ExprOp::Mul, term, a, DType::I64) : a;
    if (c != 1) term = binary(ExprOp::Mul, int_const(c), term, DType::I64);
    sum = sum ? binary(ExprOp::Add, sum, term, DType::I64) : term;
  }
  if (!sum) return int_const(constant);
  return constant ? binary(ExprOp::Add, sum, int_const(constant), DType::I64) : sum;
}

Poly atom_poly(const Expr& atom) {
  Poly p;
  p[Monomial{{print_size(atom)}, {atom}}] = 1;
  return p;
}

Poly to_poly(const Expr& e) {
  switch (e->op) {
    case ExprOp::Const: return constant_poly(e->ival);
    case ExprOp::Sym: return atom_poly(e);
    case ExprOp::Add: return add_poly(to_poly(e->args[0]), to_poly(e->args[1]), 1);
    case ExprOp::Sub: return add_poly(to_poly(e->args[0]), to_poly(e->args[1]), -1);
    case ExprOp::Mul: return mul_poly(to_poly(e->args[0]), to_poly(e->args[1]));
    case ExprOp::FloorDiv:
    case ExprOp::Mod: {
      Poly a = to_poly(e->args[0]), b = to_poly(e->args[1]);
      auto ca = as_constant(a), cb = as_constant(b);
      if (ca && cb && *cb != 0) {
        int64_t q = *ca / *cb;
        if ((*ca % *cb != 0) && ((*ca < 0) != (*cb < 0))) --q;
        return constant_poly(e->op == ExprOp::FloorDiv ? q : *ca - q * *cb);
      }
      if (auto q = exact_quotient(a, b)) return e->op == ExprOp::FloorDiv ? *q : Poly{};
      return atom_poly(binary(e->op, from_poly(a), from_poly(b), DType::I64));
    }
    case ExprOp::Max:
    case ExprOp::Min: {
      Poly a = to_poly(e->args[0]), b = to_poly(e->args[1]);
      auto ca = as_constant(a), cb = as_constant(b);
      if (ca && cb) return constant_poly(e->op == ExprOp::Max ? std::max(*ca, *cb) : std::min(*ca, *cb));
      if (a == b) return a;
      Expr x = from_poly(a), y = from_poly(b);
      if (print_size(y) < print_size(x)) std::swap(x, y);  // commutative: a fixed order
      return atom_poly(binary(e->op, x, y, DType::I64));
    }
    default:
      throw std::invalid_argument(std::string("not a size expression: ") + expr_op_name(e->op));
  }
}

}  // namespace

Expr canonical_size(const Expr& e) {
  if (e->op == ExprOp::Const || e->op == ExprOp::Sym) return e;
  return from_poly(to_poly(e));
}

}  // namespace ember
