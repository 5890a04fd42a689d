// The loop-level program: what lowering produces and fusion consumes.
//
// A Program is a list of steps in a valid execution order. Each step either
// computes one buffer element-wise (or by reduction) from an Expr body, or calls
// an ATen op (an extern) on tensors that live in buffers.
//
// Invariants:
// - Every Load in a body reads a buffer computed by an earlier step, or an input.
// - A computed buffer's logical sizes are its iteration sizes (a scatter-add's are its
//   values'); its strides are its memory layout (eager's strides for values eager would
//   return).
// - One step computes each computed buffer.
// - Bodies are expressed in the buffer's own Vars (one per non-unit dim; unit dims
//   use the constant 0) and, for reductions, its reduction Vars.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/expr.h"
#include "ir/graph.h"

namespace ember {

struct Buffer {
  enum class Kind : uint8_t { Input, Extern, Computed };
  int id = 0;
  Kind kind = Kind::Computed;
  DType dtype = DType::F32;
  Dims sizes;
  Dims strides;
  int input_index = -1;    // Input: which runtime argument
  int extern_call = -1;    // Extern: which call produced it
  int extern_output = 0;   // Extern: which output of that call
  // An input or extern result ember does not model (graph type `opaque`): ATen's alone,
  // never read by a kernel; no dtype, sizes or strides, no arena place.
  bool opaque = false;

  Dim numel() const;
  Dim extent() const;  // elements of storage the layout spans (1 + max offset; strides >= 0)
};

// A tensor that lives in memory: a strided window onto a buffer.
struct StridedView {
  int buffer = -1;
  DType dtype = DType::F32;
  Dims sizes;
  Dims strides;
  Dim offset = 0;
};

// LogSumExp only scans (logcumsumexp): the running value is log(exp(acc) + exp(x)), the
// larger operand factored out (ember_logaddexp in the preludes, as ATen's
// _log_add_exp_helper: a NaN operand gives NaN, two equal infinities themselves).
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, Any, All, ArgMax, ArgMin, LogSumExp };
constexpr ReduceOp kLastReduceOp = ReduceOp::LogSumExp;
const char* reduce_op_name(ReduceOp op);

struct ComputedBuffer {
  int buffer = -1;
  Dims sizes;                          // == the buffer's sizes
  std::vector<int> vars;               // per dim of sizes; -1 for unit dims
  std::vector<int> iter_order;         // dims from outermost to innermost (memory order)
  bool is_reduction = false;
  ReduceOp reduce_op = ReduceOp::Sum;
  Dims reduce_sizes;
  std::vector<int> reduce_vars;        // per reduce dim; -1 for unit dims
  DType acc_dtype = DType::F32;        // accumulator type (reductions)
  // Scans (cumsum, cumprod): >= 0 is the scanned dim. sizes are the full input
  // sizes, vars[scan_dim] is -1 and reduce_vars[0] walks the scanned dim; every
  // step's running value is stored (reduce_op says how values combine).
  int scan_dim = -1;
  Expr body;
  std::vector<int> origins;            // graph node ids whose work this buffer does
  // A scatter-add (index_add, scatter_add; the CUDA target, LowerOptions::atomic_scatter_add):
  // the buffer starts at zero (its kernel's first launch zeroes it) and every point of
  // `sizes`, here the added values' iteration space and not the buffer's, adds `body` to
  // the element at offset `add_at` (an i64 Expr in the same vars, loading indices). Points
  // may name one element: the adds are atomic and their order is unspecified, so the sums
  // are not deterministic. An index out of range adds 0 to a clamped element (lowering
  // writes it so): nothing is written outside the buffer. Null: an ordinary step, which
  // computes every element of its buffer once.
  Expr add_at;

  bool is_scatter_add() const { return add_at != nullptr; }

  // argmax/argmin: the result is the index of the best element, not a combined value.
  bool is_arg_reduction() const {
    return is_reduction && (reduce_op == ReduceOp::ArgMax || reduce_op == ReduceOp::ArgMin);
  }
};

struct ExternCall {
  int node = -1;                       // graph node it runs
  std::string op;                      // the node's op (aten.mm.default)
  std::vector<ValueRef> tensor_args;   // graph values passed as tensors ...
  std::vector<StridedView> tensor_views;  // ... and where each one lives
  std::vector<ValueRef> none_args;     // tensor arguments ATen gets as None: ember's kernels
                                       // apply them (a convolution's bias)
  std::vector<int> output_buffers;     // per node output; -1 when not a tensor
  std::string reason;                  // why this op is not compiled by ember
  // Positions in tensor_args of parameters the runtime prepares once and reuses while
  // they are unchanged (LowerOptions::prepared_weights); passed in eager's layout.
  std::vector<int> prepared_args;
  // Arguments the runtime passes as a zero-padded copy of a graph input, made once and kept
  // while the input is unchanged (lower/pad_matmuls.h): the view stays the input's, the
  // copy has these sizes and strides (the source's elements at the same indices).
  struct PaddedArg {
    int arg = -1;
    Dims sizes, strides;
  };
  std::vector<PaddedArg> padded_args;
};

struct Step {
  enum class Kind : uint8_t { Compute, Extern };
  Kind kind;
  int index;  // into Program::computed or Program::externs
};

struct ProgramOutput {
  bool is_tensor = false;
  StridedView view;
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<ComputedBuffer> computed;
  std::vector<ExternCall> externs;
  std::vector<Step> steps;
  std::vector<ProgramOutput> outputs;  // one per graph output
  int num_vars = 0;                    // var ids used so far
  int num_symbols = 0;                 // the graph's symbols (kernels read their values)
  std::vector<int64_t> symbol_hints;   // their hints (the text form's header)

  int add_buffer(Buffer b);
  // Whether `v` is a graph input's buffer as the caller passes it (no view of it).
  bool is_whole_input(const StridedView& v) const;
  // Whether `v` covers its whole buffer, every element once, in some order of its dims
  // (contiguous, channels-last, any permutation of them), with static sizes.
  bool is_dense_whole_buffer(const StridedView& v) const;
};


// The buffers a step reads: its body's loads, and a scatter-add's indices (add_at).
std::vector<int> loaded_buffers(const ComputedBuffer& c);

// Canonical element offset of `idx` in a strided layout (terms in dim order,
// zero terms dropped), so that equal accesses build equal Exprs.
Expr strided_index(const std::vector<Expr>& idx, const Dims& strides, const Dim& offset);

}  // namespace ember
