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
      default:
        return std::nullopt;
    }
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
