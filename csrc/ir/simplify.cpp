#include "ir/simplify.h"

#include <algorithm>
#include <optional>

namespace ember {

namespace {

struct Interval {
  int64_t lo, hi;  // inclusive
};

class BoundsSimplifier {
 public:
  explicit BoundsSimplifier(const std::unordered_map<int, int64_t>& extents) : extents_(extents) {}

  Expr run(const Expr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    Expr r = visit(e);
    memo_[e.get()] = r;
    return r;
  }

 private:
  std::optional<Interval> range(const Expr& e) {
    if (is_float(e->dtype) || is_bool(e->dtype)) return std::nullopt;
    switch (e->op) {
      case ExprOp::Const:
        return Interval{e->ival, e->ival};
      case ExprOp::Var: {
        auto it = extents_.find(static_cast<int>(e->ival));
        if (it == extents_.end() || it->second <= 0) return std::nullopt;
        return Interval{0, it->second - 1};
      }
      case ExprOp::Add:
      case ExprOp::Sub: {
        auto a = range(e->args[0]), b = range(e->args[1]);
        if (!a || !b) return std::nullopt;
        if (e->op == ExprOp::Add) return Interval{a->lo + b->lo, a->hi + b->hi};
        return Interval{a->lo - b->hi, a->hi - b->lo};
      }
      case ExprOp::Mul: {
        auto a = range(e->args[0]), b = range(e->args[1]);
        if (!a || !b) return std::nullopt;
        int64_t c[] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
        return Interval{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
      }
      case ExprOp::FloorDiv:
      case ExprOp::Shr: {
        auto a = range(e->args[0]);
        int64_t c = positive_divisor(e);
        if (!a || c <= 0) return std::nullopt;
        return Interval{floor_div(a->lo, c), floor_div(a->hi, c)};
      }
      case ExprOp::TruncDiv:
      case ExprOp::Fmod: {  // C's, which the rules below make of non-negative values only
        auto a = range(e->args[0]);
        int64_t c = positive_divisor(e);
        if (!a || a->lo < 0 || c <= 0) return std::nullopt;
        if (e->op == ExprOp::TruncDiv) return Interval{a->lo / c, a->hi / c};
        return a->hi < c ? *a : Interval{0, c - 1};
      }
      case ExprOp::Mod:
      case ExprOp::BitAnd: {
        auto a = range(e->args[0]);
        int64_t c = positive_divisor(e);
        if (c <= 0) return std::nullopt;
        if (a && a->lo >= 0 && a->hi < c) return a;
        return Interval{0, c - 1};
      }
      case ExprOp::Min:
      case ExprOp::Max: {
        auto a = range(e->args[0]), b = range(e->args[1]);
        if (!a || !b) return std::nullopt;
        if (e->op == ExprOp::Min) return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
        return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
      }
      default:
        return std::nullopt;
    }
  }

  static int64_t floor_div(int64_t a, int64_t c) { return a >= 0 ? a / c : -((-a + c - 1) / c); }

  // c for an integer a // c or a % c with a positive constant c, 2^k for a >> k and
  // a & (2^k - 1) (the forms those take below); 0 otherwise.
  static int64_t positive_divisor(const Expr& e) {
    if (e->args.size() != 2 || is_float(e->dtype) || is_bool(e->dtype)) return 0;
    const Expr& c = e->args[1];
    if (!c->is_const() || c->ival <= 0) return 0;
    switch (e->op) {
      case ExprOp::FloorDiv:
      case ExprOp::Mod:
      case ExprOp::TruncDiv:
      case ExprOp::Fmod: return c->ival;
      case ExprOp::Shr: return c->ival < 63 ? int64_t{1} << c->ival : 0;
      case ExprOp::BitAnd: return (c->ival & (c->ival + 1)) == 0 ? c->ival + 1 : 0;
      default: return 0;
    }
  }

  static int log2_exact(int64_t c) {
    if (c <= 0 || (c & (c - 1)) != 0) return -1;
    int k = 0;
    while ((int64_t{1} << k) != c) ++k;
    return k;
  }

  // a // c * c <= b (or (a >> k) * 2^k <= b) for every a when b is a, or a plus something
  // non-negative: the window test of pooling's gather form (its candidate window starts
  // at or before i).
  bool floor_multiple_at_most(const Expr& lhs, const Expr& rhs) {
    if (lhs->op != ExprOp::Mul) return false;
    if (lhs->args[0]->op != ExprOp::FloorDiv && lhs->args[0]->op != ExprOp::Shr) return false;
    const Expr& fd = lhs->args[0];
    int64_t c = positive_divisor(fd);
    if (c <= 0 || !lhs->args[1]->is_int_const(c)) return false;
    const Expr& a = fd->args[0];
    if (rhs == a) return true;
    if (rhs->op != ExprOp::Add || rhs->args[0] != a) return false;
    auto k = range(rhs->args[1]);
    return k && k->lo >= 0;
  }

  Expr visit(const Expr& e) {
    if (e->args.empty()) return e;
    std::vector<Expr> args;
    for (const auto& a : e->args) args.push_back(run(a));
    switch (e->op) {
      case ExprOp::Lt:
      case ExprOp::Le:
      case ExprOp::Gt:
      case ExprOp::Ge: {
        auto a = range(args[0]), b = range(args[1]);
        if (a && b) {
          bool always = false, never = false;
          switch (e->op) {
            case ExprOp::Lt: always = a->hi < b->lo; never = a->lo >= b->hi; break;
            case ExprOp::Le: always = a->hi <= b->lo; never = a->lo > b->hi; break;
            case ExprOp::Gt: always = a->lo > b->hi; never = a->hi <= b->lo; break;
            default: always = a->lo >= b->hi; never = a->hi < b->lo; break;
          }
          if (always) return bool_const(true);
          if (never) return bool_const(false);
        }
        if (e->op == ExprOp::Le && floor_multiple_at_most(args[0], args[1])) return bool_const(true);
        if (e->op == ExprOp::Ge && floor_multiple_at_most(args[1], args[0])) return bool_const(true);
        break;
      }
      case ExprOp::Min:
      case ExprOp::Max: {
        auto a = range(args[0]), b = range(args[1]);
        if (a && b) {
          bool a_low = a->hi <= b->lo, b_low = b->hi <= a->lo;
          if (e->op == ExprOp::Min && (a_low || b_low)) return a_low ? args[0] : args[1];
          if (e->op == ExprOp::Max && (a_low || b_low)) return a_low ? args[1] : args[0];
        }
        break;
      }
      case ExprOp::FloorDiv:
      case ExprOp::Mod: {
        // Of a non-negative integer by a power of two: a shift or a mask, which the C
        // compiler vectorizes (its floor-division helper tests signs per element).
        auto a = range(args[0]);
        int64_t c = positive_divisor(e);
        int k = log2_exact(c);
        if (a && a->lo >= 0 && k >= 0 && e->dtype == DType::I64) {
          if (e->op == ExprOp::FloorDiv)
            return k == 0 ? args[0] : binary(ExprOp::Shr, args[0], int_const(k), DType::I64);
          return binary(ExprOp::BitAnd, args[0], int_const(c - 1), DType::I64);
        }
        // Below the divisor (a reshape's index of a dim that does not wrap): the
        // quotient is 0 and the remainder the value itself. Otherwise, of a
        // non-negative value, C's division, which needs no sign tests.
        if (a && a->lo >= 0 && c > 0 && a->hi < c) return e->op == ExprOp::FloorDiv ? int_const(0, e->dtype) : args[0];
        if (a && a->lo >= 0 && c > 0)
          return binary(e->op == ExprOp::FloorDiv ? ExprOp::TruncDiv : ExprOp::Fmod, args[0], args[1], e->dtype);
        break;
      }
      case ExprOp::LogicalAnd:
        if (args[0]->is_const()) return args[0]->ival ? args[1] : bool_const(false);
        if (args[1]->is_const()) return args[1]->ival ? args[0] : bool_const(false);
        break;
      case ExprOp::LogicalOr:
        if (args[0]->is_const()) return args[0]->ival ? bool_const(true) : args[1];
        if (args[1]->is_const()) return args[1]->ival ? bool_const(true) : args[0];
        break;
      case ExprOp::LogicalNot:
        if (args[0]->is_const()) return bool_const(!args[0]->ival);
        break;
      default:
        break;
    }
    bool changed = false;
    for (size_t i = 0; i < args.size(); ++i) changed |= args[i] != e->args[i];
    if (!changed) return e;
    std::unordered_map<int, Expr> none;
    // Rebuild through the factories so that Where on a constant folds.
    switch (e->op) {
      case ExprOp::Where: return where(args[0], args[1], args[2]);
      case ExprOp::Cast: return e->ival ? rounding_cast(args[0], e->dtype) : cast(args[0], e->dtype);
      case ExprOp::Load: return load(static_cast<int>(e->ival), args[0], e->dtype);
      default: break;
    }
    if (is_binary(e->op)) {
      if (e->dtype == DType::I64 && e->op == ExprOp::Add) return add(args[0], args[1]);
      if (e->dtype == DType::I64 && e->op == ExprOp::Mul) return mul(args[0], args[1]);
      return binary(e->op, args[0], args[1], e->dtype);
    }
    return unary(e->op, args[0], e->dtype);
  }

  const std::unordered_map<int, int64_t>& extents_;
  std::unordered_map<const ExprNode*, Expr> memo_;
};

}  // namespace

Expr simplify_bounds(const Expr& e, const std::unordered_map<int, int64_t>& extents) {
  return BoundsSimplifier(extents).run(e);
}

}  // namespace ember
