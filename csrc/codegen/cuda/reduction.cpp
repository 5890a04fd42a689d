#include "codegen/cuda/reduction.h"

#include "schedule/accumulator.h"
#include "schedule/cuda/kernel_info.h"

namespace ember {

std::string acc_type(const ComputedBuffer& c, int64_t chain) {
  if (c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All) return "int";
  if (sums_in_double(c, chain)) return "double";
  return CEmitter::c_type(c.acc_dtype);
}

Acc declare_thread_acc(CEmitter& em, const ComputedBuffer& c, int64_t chain) {
  return declare_acc(em, c, acc_type(c, chain));
}

namespace {

// "" for a whole warp, "<W>" for a row of W lanes of one (several rows a warp).
std::string row_lanes_arg(int row_lanes) { return row_lanes == 32 ? "" : "<" + std::to_string(row_lanes) + ">"; }

}  // namespace

void combine(CEmitter& em, const std::string& acc, ReduceOp op, int row_lanes) {
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
  em.line(acc + (row_lanes > 0 ? " = ember_warp_reduce" + row_lanes_arg(row_lanes) + "(" + acc + ", " + functor + ");"
                               : " = ember_block_reduce(" + acc + ", " + functor + ", scratch);"));
}

void combine_arg(CEmitter& em, const Acc& a, ReduceOp op, int row_lanes) {
  const std::string mx = op == ReduceOp::ArgMax ? "true" : "false";
  const std::string lanes = row_lanes == 32 ? "" : ", " + std::to_string(row_lanes);
  em.line(row_lanes > 0 ? "ember_warp_arg<" + mx + lanes + ">(" + a.acc + ", " + a.index + ");"
                        : "ember_block_arg<" + mx + ">(" + a.acc + ", " + a.index + ", scratch);");
}

}  // namespace ember
