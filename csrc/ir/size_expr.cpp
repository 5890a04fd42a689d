#include "ir/size_expr.h"

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
