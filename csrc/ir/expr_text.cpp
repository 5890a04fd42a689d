#include "ir/expr_text.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace ember {

namespace {

bool returns_bool(ExprOp op) {
  switch (op) {
    case ExprOp::Eq: case ExprOp::Ne: case ExprOp::Lt: case ExprOp::Le: case ExprOp::Gt: case ExprOp::Ge:
    case ExprOp::IsNan: case ExprOp::IsInf: case ExprOp::IsFinite:
    case ExprOp::LogicalNot: case ExprOp::LogicalAnd: case ExprOp::LogicalOr: case ExprOp::LogicalXor:
      return true;
    default:
      return false;
  }
}

// The dtype an op node has unless its text says otherwise.
DType natural_dtype(ExprOp op, const std::vector<Expr>& args) {
  if (returns_bool(op)) return DType::Bool;
  if (op == ExprOp::Where) return args[1]->dtype;
  return args[0]->dtype;
}

std::string var_name(int64_t id) {
  if (id >= kInnerVarBase) return "i" + std::to_string(id - kInnerVarBase);
  if (id >= kOuterVarBase) return "o" + std::to_string(id - kOuterVarBase);
  return "v" + std::to_string(id);
}

std::string literal(const Expr& e) {
  std::string s;
  if (is_float(e->dtype)) {
    s = print_float(e->fval);
    if (e->dtype != DType::F32) s += std::string(":") + dtype_name(e->dtype);
  } else if (is_bool(e->dtype)) {
    s = e->ival ? "true" : "false";
  } else {
    s = std::to_string(e->ival);
    if (e->dtype != DType::I64) s += std::string(":") + dtype_name(e->dtype);
  }
  return s;
}

void print(std::string& out, const Expr& e, const std::vector<DType>* dtypes) {
  switch (e->op) {
    case ExprOp::Const: out += literal(e); return;
    case ExprOp::Var: out += var_name(e->ival); return;
    case ExprOp::Sym: out += "s" + std::to_string(e->ival); return;
    case ExprOp::Load:
      out += "buf" + std::to_string(e->ival) + "[";
      print(out, e->args[0], dtypes);
      out += "]";
      if (!dtypes || static_cast<size_t>(e->ival) >= dtypes->size() || (*dtypes)[e->ival] != e->dtype)
        out += std::string(":") + dtype_name(e->dtype);
      return;
    case ExprOp::Cast:
      out += std::string(e->ival ? "round_" : "") + dtype_name(e->dtype) + "(";
      print(out, e->args[0], dtypes);
      out += ")";
      return;
    case ExprOp::Add:
    case ExprOp::Mul:
      out += "(";
      print(out, e->args[0], dtypes);
      out += e->op == ExprOp::Add ? " + " : " * ";
      print(out, e->args[1], dtypes);
      out += ")";
      break;
    default:
      out += std::string(expr_op_name(e->op)) + "(";
      for (size_t i = 0; i < e->args.size(); ++i) {
        if (i) out += ", ";
        print(out, e->args[i], dtypes);
      }
      out += ")";
      break;
  }
  if (e->dtype != natural_dtype(e->op, e->args)) out += std::string(":") + dtype_name(e->dtype);
}

const std::unordered_map<std::string, ExprOp>& ops_by_name() {
  static const auto* m = [] {
    auto* out = new std::unordered_map<std::string, ExprOp>();
    for (int op = static_cast<int>(ExprOp::Neg); op <= static_cast<int>(ExprOp::Cast); ++op)
      out->emplace(expr_op_name(static_cast<ExprOp>(op)), static_cast<ExprOp>(op));
    return out;
  }();
  return *m;
}

bool is_dtype_name(const std::string& w) {
  for (DType t : {DType::Bool, DType::U8, DType::I8, DType::I16, DType::I32, DType::I64, DType::F16, DType::BF16,
                  DType::F32, DType::F64})
    if (w == dtype_name(t)) return true;
  return false;
}

// "v12" -> 12 for prefix 'v'; -1 when w is not the prefix and digits.
int64_t numbered(const std::string& w, char prefix) {
  if (w.size() < 2 || w[0] != prefix) return -1;
  for (size_t i = 1; i < w.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(w[i]))) return -1;
  return std::stoll(w.substr(1));
}

class ExprParser {
 public:
  ExprParser(TextReader& in, const std::vector<DType>& dtypes) : in_(in), dtypes_(dtypes) {}

  Expr expr() {
    const char c = in_.cur();
    if (c == '(') return infix();
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    const std::string w = in_.identifier();
    if (w == "true" || w == "false") return bool_const(w == "true");
    if (w == "inf" || w == "nan") return annotated_float(w == "inf" ? INFINITY : NAN);
    if (w.rfind("buf", 0) == 0 && in_.cur() == '[') {
      const int64_t b = numbered(w.substr(2), 'f');  // "buf12" -> "f12" -> 12
      if (b >= 0) return load(b);
    }
    if (in_.cur() != '(') {  // a leaf (i64 is a var here, a cast in i64(x))
      if (int64_t v = numbered(w, 'v'); v >= 0) return var(static_cast<int>(v));
      if (int64_t v = numbered(w, 'o'); v >= 0) return var(outer_var(static_cast<int>(v)));
      if (int64_t v = numbered(w, 'i'); v >= 0) return var(inner_var(static_cast<int>(v)));
      if (int64_t v = numbered(w, 's'); v >= 0) return sym(static_cast<int>(v));
    }
    const bool rounding = w.rfind("round_", 0) == 0 && is_dtype_name(w.substr(6));
    if (rounding || is_dtype_name(w)) {
      in_.expect('(');
      Expr a = expr();
      in_.expect(')');
      return node_of(ExprOp::Cast, dtype_from_name(rounding ? w.substr(6) : w), rounding ? 1 : 0, {a});
    }
    auto op = ops_by_name().find(w);
    if (op == ops_by_name().end()) in_.error("unknown expression '" + w + "'");
    std::vector<Expr> args;
    in_.expect('(');
    do args.push_back(expr()); while (in_.try_consume(','));
    in_.expect(')');
    const size_t arity = op->second == ExprOp::Where ? 3 : is_binary(op->second) ? 2 : 1;
    if (args.size() != arity) in_.error(w + " takes " + std::to_string(arity) + " operands");
    return typed(op->second, std::move(args));
  }

 private:
  Expr infix() {
    in_.expect('(');
    Expr a = expr();
    ExprOp op = ExprOp::Add;
    if (!in_.try_consume('+')) {
      in_.expect('*');
      op = ExprOp::Mul;
    }
    Expr b = expr();
    in_.expect(')');
    return typed(op, {a, b});
  }

  Expr typed(ExprOp op, std::vector<Expr> args) {
    const DType natural = natural_dtype(op, args);
    return node_of(op, annotation(natural), 0, std::move(args));
  }

  Expr load(int64_t b) {
    in_.expect('[');
    Expr index = expr();
    in_.expect(']');
    const DType fallback = static_cast<size_t>(b) < dtypes_.size() ? dtypes_[b] : DType::F32;
    return node_of(ExprOp::Load, annotation(fallback, static_cast<size_t>(b) < dtypes_.size()), b, {index});
  }

  // A literal: an integer, or a float when it has '.', an exponent, inf or nan.
  Expr number() {
    if (in_.at_float()) return annotated_float(in_.floating());
    const int64_t i = in_.integer();
    return int_const(i, annotation(DType::I64));
  }

  Expr annotated_float(double v) { return float_const(v, annotation(DType::F32)); }

  // `:dtype` right after a node, or `otherwise` (an error when it is not `known`).
  DType annotation(DType otherwise, bool known = true) {
    if (in_.try_adjacent(':')) return dtype_from_name(in_.identifier());
    if (!known) in_.error("a load of an undeclared buffer needs its dtype");
    return otherwise;
  }

  TextReader& in_;
  const std::vector<DType>& dtypes_;
};

}  // namespace

std::string print_float(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string print_expr(const Expr& e, const std::vector<DType>* buffer_dtypes) {
  std::string out;
  print(out, e, buffer_dtypes);
  return out;
}

std::string to_string(const Expr& e) { return print_expr(e); }

Expr parse_expr(TextReader& in, const std::vector<DType>& buffer_dtypes) {
  return ExprParser(in, buffer_dtypes).expr();
}

}  // namespace ember
