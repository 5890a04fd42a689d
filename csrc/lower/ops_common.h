// Helpers shared by the op tables: reading arguments, building element-wise maps.
#pragma once
#include <functional>
#include <vector>

#include "lower/lowering.h"

namespace ember {

// The torch.result_type of a list of arguments (tensors and Python numbers).
DType args_result_type(const LowerCtx& ctx, const std::vector<const Arg*>& args);

// The value of argument `a` at logical index `idx` of a result of shape `out`,
// broadcast and cast to `t`. Numbers become constants.
Expr arg_at(const LowerCtx& ctx, const Arg& a, const std::vector<Expr>& idx, DType t);

// How an op reads operands whose dtype differs from its common dtype (torch.result_type).
enum class Operands {
  // Eager (TensorIterator) converts every operand to the common dtype first; for f16
  // and bf16 that rounds a wider operand (a Python float, a 0-d f32 tensor).
  Common,
  // mul and div read a scalar second operand (a number or a 0-d tensor) at full f32
  // precision instead: ATen's reduced-float fast path (original_scalar_value). On CUDA
  // (LowerOptions::aten_cuda) a number in any position, and no 0-d tensor.
  ExactScalarSecond,
  // add and sub: Common on the CPU; on CUDA a number in any position at f32 (ATen's
  // opmath_gpu_kernel_with_scalars reads a CPU scalar as opmath_t).
  ExactNumbersOnCuda,
};

// An element-wise op over `args` (tensors broadcast to the node's output shape,
// numbers as constants), computing in `compute` and producing the node's dtype.
TensorIR map_args(LowerCtx& ctx, std::vector<const Arg*> args, DType compute,
                  std::function<Expr(const std::vector<Expr>&)> f, Operands mode = Operands::Common);

// Shorthand for building float math in `t`.
inline Expr c(double v, DType t) { return const_of(v, t); }
inline Expr op2(ExprOp op, Expr a, Expr b) { DType t = a->dtype; return binary(op, std::move(a), std::move(b), t); }
inline Expr op1(ExprOp op, Expr a) { DType t = a->dtype; return unary(op, std::move(a), t); }
inline Expr cmp(ExprOp op, Expr a, Expr b) { return binary(op, std::move(a), std::move(b), DType::Bool); }

}  // namespace ember
