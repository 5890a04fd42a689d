#include "codegen/accumulator.h"

#include <stdexcept>

namespace ember {

std::string reduction_identity(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Any: return "0";
    case ReduceOp::Prod:
    case ReduceOp::All: return "1";
    case ReduceOp::Max:
    case ReduceOp::LogSumExp:
    case ReduceOp::ArgMax: return is_float(t) ? "-INFINITY" : CEmitter::lowest_or_highest(t, true);
    default: return is_float(t) ? "INFINITY" : CEmitter::lowest_or_highest(t, false);
  }
}

Acc declare_acc(CEmitter& em, const ComputedBuffer& c, const std::string& type, bool wide,
                std::vector<std::string>* clauses) {
  Acc a;
  a.acc = em.fresh("acc");
  a.type = type;
  auto clause = [&](const char* op, const std::string& var) {
    if (clauses) clauses->push_back(std::string("reduction(") + op + ":" + var + ")");
  };
  switch (c.reduce_op) {
    case ReduceOp::Sum:
      if (wide) {
        a.wide = a.acc + "_w";  // the f32 partial a.acc is declared per block, where the loop is printed
        em.line("double " + a.wide + " = 0;");
      } else {
        em.line(type + " " + a.acc + " = 0;");
      }
      clause("+", a.acc);
      break;
    case ReduceOp::Prod:
      em.line(type + " " + a.acc + " = 1;");
      clause("*", a.acc);
      break;
    case ReduceOp::Max:
    case ReduceOp::Min:
      em.line(type + " " + a.acc + " = " + reduction_identity(c.reduce_op, c.acc_dtype) + ";");
      clause(c.reduce_op == ReduceOp::Max ? "max" : "min", a.acc);
      if (is_float(c.acc_dtype)) {
        a.flag = em.fresh("nan");
        em.line("int " + a.flag + " = 0;");
        clause("|", a.flag);
      }
      break;
    case ReduceOp::Any:
    case ReduceOp::All:
      a.type = "int";
      em.line("int " + a.acc + " = " + reduction_identity(c.reduce_op, c.acc_dtype) + ";");
      clause(c.reduce_op == ReduceOp::Any ? "|" : "&", a.acc);
      break;
    case ReduceOp::LogSumExp:  // scans only: no OpenMP clause
      em.line(type + " " + a.acc + " = -INFINITY;");
      break;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: {
      // Compared in the input's compute type (the body's). A CUDA thread with no element
      // keeps (the identity, 0), which only ties an all-identity row, whose answer is 0.
      const DType vt = c.body->dtype;
      a.type = CEmitter::c_type(vt);
      em.line(a.type + " " + a.acc + " = " + reduction_identity(c.reduce_op, vt) + ";");
      a.index = em.fresh("arg");
      em.line("int64_t " + a.index + " = 0;");
      break;
    }
  }
  return a;
}

std::string arg_update(const ComputedBuffer& c, const Acc& a, const std::string& v, const std::string& index) {
  std::string better = c.reduce_op == ReduceOp::ArgMax ? v + " > " + a.acc : v + " < " + a.acc;
  if (is_float(c.body->dtype)) better = "(" + better + ") || (" + v + " != " + v + " && " + a.acc + " == " + a.acc + ")";
  return "if (" + better + ") { " + a.acc + " = " + v + "; " + a.index + " = " + index + "; }";
}

void accumulate_into(CEmitter& em, ReduceOp op, const std::string& dst, const std::string& flag, const std::string& v) {
  switch (op) {
    case ReduceOp::Sum: em.line(dst + " += " + v + ";"); break;
    case ReduceOp::Prod: em.line(dst + " *= " + v + ";"); break;
    case ReduceOp::Any: em.line(dst + " |= (" + v + " != 0);"); break;
    case ReduceOp::All: em.line(dst + " &= (" + v + " != 0);"); break;
    default:
      em.line(dst + " = " + v + (op == ReduceOp::Max ? " > " : " < ") + dst + " ? " + v + " : " + dst + ";");
      if (!flag.empty()) em.line(flag + " |= " + v + " != " + v + ";");
      break;
  }
}

void accumulate(CEmitter& em, const ComputedBuffer& c, const Acc& a, const std::string& v, const std::string& index) {
  if (!c.is_arg_reduction()) return accumulate_into(em, c.reduce_op, a.acc, a.flag, v);
  if (index.empty()) throw std::logic_error("ember: an arg-reduction accumulated without its element index");
  em.line(arg_update(c, a, v, index));
}

std::string finish_acc(CEmitter& em, const ComputedBuffer& c, const Acc& a, DType out) {
  if (c.is_arg_reduction()) {
    if (out == DType::I64) return a.index;
    std::string name = em.fresh("red");
    em.line("const " + CEmitter::c_type(out) + " " + name + " = " + CEmitter::as_stored(a.index, out) + ";");
    return name;
  }
  std::string r = a.acc;
  if (a.type == "double" && a.type != CEmitter::c_type(c.acc_dtype)) {  // CUDA's long float sums
    r = em.fresh("acc");
    em.line("const float " + r + " = (float)" + a.acc + ";");
  }
  if (!a.flag.empty()) em.line("if (" + a.flag + ") " + a.acc + " = NAN;");
  const bool any_all = c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All;
  if (any_all) r = "(" + a.acc + " != 0)";
  // The local must equal what a load of the stored value would give.
  if (out == c.acc_dtype || any_all) return r;
  std::string name = em.fresh("red");
  em.line("const " + CEmitter::c_type(out) + " " + name + " = " + CEmitter::as_stored(r, out) + ";");
  return name;
}

std::string scan_step_text(ReduceOp op, const Acc& a, const std::string& v) {
  const std::string& acc = a.acc;
  switch (op) {
    case ReduceOp::Sum: return acc + " += " + v + ";";
    case ReduceOp::Prod: return acc + " *= " + v + ";";
    case ReduceOp::LogSumExp:
      return acc + " = ember_logaddexp_" + (a.type == "double" ? "f64" : "f32") + "(" + acc + ", " + v + ");";
    default: throw std::logic_error("ember: a scan combines by sum, product or log-sum-exp only");
  }
}

std::string combine_text(ReduceOp op, const std::string& dst, const std::string& src) {
  switch (op) {
    case ReduceOp::Sum: return dst + " += " + src + ";";
    case ReduceOp::Prod: return dst + " *= " + src + ";";
    case ReduceOp::Max: return dst + " = " + src + " > " + dst + " ? " + src + " : " + dst + ";";
    case ReduceOp::Min: return dst + " = " + src + " < " + dst + " ? " + src + " : " + dst + ";";
    case ReduceOp::Any: return dst + " |= " + src + ";";
    case ReduceOp::All: return dst + " &= " + src + ";";
    default: return "";
  }
}

}  // namespace ember
