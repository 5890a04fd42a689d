#include "codegen/cuda_reduction.h"

#include "schedule/accumulator.h"
#include "schedule/cuda/kernel_info.h"

namespace ember {

std::string acc_type(const ComputedBuffer& c, int64_t chain) {
  if (c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All) return "int";
  if (sums_in_double(c, chain)) return "double";
  return CEmitter::c_type(c.acc_dtype);
}

Acc declare_acc(CEmitter& em, const ComputedBuffer& c, int64_t chain) {
  Acc a;
  a.acc = em.fresh("acc");
  DType t = c.acc_dtype;
  bool flt = is_float(t);
  a.type = acc_type(c, chain);
  switch (c.reduce_op) {
    case ReduceOp::Sum: em.line(a.type + " " + a.acc + " = 0;"); break;
    case ReduceOp::Prod: em.line(a.type + " " + a.acc + " = 1;"); break;
    case ReduceOp::Max:
    case ReduceOp::Min: {
      bool mx = c.reduce_op == ReduceOp::Max;
      std::string init = flt ? (mx ? "-INFINITY" : "INFINITY") : CEmitter::lowest_or_highest(t, mx);
      em.line(a.type + " " + a.acc + " = " + init + ";");
      if (flt) {
        a.flag = em.fresh("nan");
        em.line("int " + a.flag + " = 0;");
      }
      break;
    }
    case ReduceOp::Any:
      a.type = "int";
      em.line("int " + a.acc + " = 0;");
      break;
    case ReduceOp::All:
      a.type = "int";
      em.line("int " + a.acc + " = 1;");
      break;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: {
      // Compared in the input's compute type (the body's); a thread with no element keeps
      // (the identity, 0), which only ties an all-identity row, whose answer is 0.
      const DType vt = c.body->dtype;
      const bool mx = c.reduce_op == ReduceOp::ArgMax;
      a.type = CEmitter::c_type(vt);
      em.line(a.type + " " + a.acc + " = " + (is_float(vt) ? (mx ? "-INFINITY" : "INFINITY")
                                                          : CEmitter::lowest_or_highest(vt, mx)) + ";");
      a.index = em.fresh("arg");
      em.line("int64_t " + a.index + " = 0;");
      break;
    }
  }
  return a;
}

void accumulate(CEmitter& em, const ComputedBuffer& c, const Acc& a, const std::string& v, const std::string& index) {
  switch (c.reduce_op) {
    case ReduceOp::Sum: em.line(a.acc + " += " + v + ";"); break;
    case ReduceOp::Prod: em.line(a.acc + " *= " + v + ";"); break;
    case ReduceOp::Max:
      em.line(a.acc + " = " + v + " > " + a.acc + " ? " + v + " : " + a.acc + ";");
      if (!a.flag.empty()) em.line(a.flag + " |= " + v + " != " + v + ";");
      break;
    case ReduceOp::Min:
      em.line(a.acc + " = " + v + " < " + a.acc + " ? " + v + " : " + a.acc + ";");
      if (!a.flag.empty()) em.line(a.flag + " |= " + v + " != " + v + ";");
      break;
    case ReduceOp::Any: em.line(a.acc + " |= (" + v + " != 0);"); break;
    case ReduceOp::All: em.line(a.acc + " &= (" + v + " != 0);"); break;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: {
      if (index.empty()) throw CudaUnsupported("CUDA codegen: an arg-reduction without its element index");
      // Strictly better, or the first NaN: the first extremum of the thread's elements.
      std::string better = c.reduce_op == ReduceOp::ArgMax ? v + " > " + a.acc : v + " < " + a.acc;
      if (is_float(c.body->dtype)) better = "(" + better + ") || (" + v + " != " + v + " && " + a.acc + " == " + a.acc + ")";
      em.line("if (" + better + ") { " + a.acc + " = " + v + "; " + a.index + " = " + index + "; }");
      break;
    }
  }
}

void combine(CEmitter& em, const std::string& acc, ReduceOp op, bool warp) {
  const char* functor = "EmberSum()";
  switch (op) {
    case ReduceOp::Sum: functor = "EmberSum()"; break;
    case ReduceOp::Prod: functor = "EmberProd()"; break;
    case ReduceOp::Max: functor = "EmberMax()"; break;
    case ReduceOp::Min: functor = "EmberMin()"; break;
    case ReduceOp::Any: functor = "EmberOr()"; break;
    case ReduceOp::All: functor = "EmberAnd()"; break;
    default: throw CudaUnsupported("CUDA codegen: no combine for this reduction");
  }
  em.line(acc + (warp ? " = ember_warp_reduce(" + acc + ", " + functor + ");"
                      : " = ember_block_reduce(" + acc + ", " + functor + ", scratch);"));
}

void combine_arg(CEmitter& em, const Acc& a, ReduceOp op, bool warp) {
  const std::string mx = op == ReduceOp::ArgMax ? "true" : "false";
  em.line(warp ? "ember_warp_arg<" + mx + ">(" + a.acc + ", " + a.index + ");"
               : "ember_block_arg<" + mx + ">(" + a.acc + ", " + a.index + ", scratch);");
}

std::string finish_acc(CEmitter& em, const ComputedBuffer& c, const Acc& a, DType out) {
  if (c.is_arg_reduction()) {
    if (out == DType::I64) return a.index;
    std::string name = em.fresh("red");
    em.line("const " + CEmitter::c_type(out) + " " + name + " = " + CEmitter::as_stored(a.index, out) + ";");
    return name;
  }
  std::string r = a.acc;
  if (a.type != CEmitter::c_type(c.acc_dtype) && a.type == "double") {
    r = em.fresh("acc");
    em.line("const float " + r + " = (float)" + a.acc + ";");
  }
  if (!a.flag.empty()) em.line("if (" + a.flag + ") " + a.acc + " = NAN;");
  if (c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All) r = "(" + a.acc + " != 0)";
  if (out == c.acc_dtype || c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All) return r;
  std::string name = em.fresh("red");
  em.line("const " + CEmitter::c_type(out) + " " + name + " = " + CEmitter::as_stored(r, out) + ";");
  return name;
}

}  // namespace ember
