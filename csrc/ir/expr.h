// The loop-level expression language: the body of every ember kernel.
//
// An Expr is an immutable tree node, shared by pointer; factories fold constants
// in index arithmetic and every node carries a structural hash, so equality, CSE
// and cache keys are cheap and deterministic.
//
// Semantics (the contract codegen implements, matching PyTorch eager):
// - Values of dtype f16/bf16 are carried in f32 holding a value representable in
//   that type; Cast to f16/bf16 rounds (round-to-nearest-even), Load widens.
// - cast(cast(x, f16|bf16), type(x)) is x: the round trip is dropped. Lowering
//   uses it inside one eager op's decomposition, whose intermediates eager never
//   rounds. A rounding_cast (Cast with ival 1) always rounds: an explicit
//   .to(f16), and every op's f16/bf16 result as eager rounds it (lowering.cpp).
// - Integer arithmetic wraps (two's complement). Integer division and remainder
//   by zero yield 0 instead of trapping (PyTorch raises; ember never crashes).
// - FloorDiv/Mod are Python's (round toward -inf, remainder takes the divisor's
//   sign); TruncDiv/Fmod are C's. On floats they are ATen's: FloorDiv goes
//   through fmod (1 // 0.1 == 9, inf // 3 is NaN, x // 0 is x / 0) and a zero Mod
//   keeps the dividend's sign.
// - Max/Min propagate NaN (torch.maximum). Comparisons with NaN are false except Ne.
//   Of zeros of opposite sign the first operand wins (ATen's std::max), except on CUDA
//   for two computed operands, where -0.0 orders below +0.0 (ATen's CUDA maximum and
//   the one-instruction max.NaN; codegen/cuda/prelude.cpp).
// - Where(c, a, b) evaluates only the selected branch, so a Load guarded by a
//   bounds test never reads out of bounds.
// - Load(buffer, index) reads element `index` (in elements, not bytes) of a
//   buffer; the index is an i64 Expr, possibly data-dependent (gather).
// - Var is a loop index (i64) identified by an integer id.
// - Sym is a graph symbol (i64, ival its index): a size Dynamo left symbolic, bound
//   at run time (docs/dynamic_shapes.md).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/dtype.h"

namespace ember {

enum class ExprOp : uint8_t {
  // leaves
  Const,
  Var,
  Load,
  Sym,  // a graph symbol: a size known only at run time (ival: its index)
  // unary
  Neg, Abs, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sqrt, Rsqrt,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Asinh, Acosh, Atanh,
  Erf, Erfc, Sigmoid, Floor, Ceil, Round, Trunc, Sign, Reciprocal,
  IsNan, IsInf, IsFinite, LogicalNot, BitNot,
  // binary
  Add, Sub, Mul, Div, FloorDiv, TruncDiv, Mod, Fmod, Pow, Max, Min, Atan2,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, BitAnd, BitOr, BitXor,
  Shl, Shr,
  // other
  Where,  // args: cond, then, else
  Cast,   // args: value; dtype is the target
};

const char* expr_op_name(ExprOp op);
bool is_unary(ExprOp op);
bool is_binary(ExprOp op);
// Ops that lower to a libm call (cost and vectorization depend on libmvec).
bool is_transcendental(ExprOp op);

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

// Var ids: a Program's vars count from 0; a kernel's loop vars (schedule/kernel.h) are
// outer_var(d) and inner_var(d), distinct from them (the texts print them o<d>, i<d>).
constexpr int kOuterVarBase = 1 << 28;
constexpr int kInnerVarBase = 2 << 28;
inline int outer_var(int k) { return kOuterVarBase + k; }
inline int inner_var(int k) { return kInnerVarBase + k; }

struct ExprNode {
  ExprOp op;
  DType dtype;
  int64_t ival = 0;  // Const (integer/bool dtypes), Var id, Load buffer id
  double fval = 0;   // Const (float dtypes)
  std::vector<Expr> args;
  size_t hash = 0;

  bool is_const() const { return op == ExprOp::Const; }
  bool is_int_const(int64_t v) const { return op == ExprOp::Const && !is_float(dtype) && ival == v; }
};

// ---- factories -------------------------------------------------------------
Expr int_const(int64_t v, DType t = DType::I64);
Expr float_const(double v, DType t = DType::F32);
Expr bool_const(bool v);
// A constant of dtype t holding the number v (rounded for f16/bf16).
Expr const_of(double v, DType t);
Expr var(int id);
Expr sym(int index);
Expr load(int buffer, Expr index, DType t);
Expr unary(ExprOp op, Expr a, DType t);
Expr binary(ExprOp op, Expr a, Expr b, DType t);
Expr where(Expr c, Expr a, Expr b);
Expr cast(Expr a, DType t);  // no-op when a already has dtype t
Expr rounding_cast(Expr a, DType t);  // a cast the round-trip rule above keeps
// The node exactly as given, folding nothing (for parsers: ival is a Load's buffer, a
// Var's id, a Sym's index, 1 for a rounding Cast).
Expr node_of(ExprOp op, DType t, int64_t ival, std::vector<Expr> args);

// Index arithmetic on i64 with folding.
Expr add(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr add(Expr a, int64_t b);
Expr mul(Expr a, int64_t b);

// ---- analysis ----------------------------------------------------------------
bool equal(const Expr& a, const Expr& b);
bool depends_on(const Expr& e, int var_id);
// d(e)/d(var) when e is affine in var (a Load whose index depends on var, or a
// var under a non-linear op, makes it non-affine), else nullopt.
std::optional<int64_t> coefficient(const Expr& e, int var_id);
// Number of nodes, counting shared subtrees once per use; used by inlining heuristics.
// A size expression (constants and symbols only: `128 * s1`) costs nothing, as the
// constant it is at any one call does, so a graph with symbols inlines and realizes
// what its static twin does.
int64_t cost(const Expr& e);
// Buffers read by e, in first-use order, without repeats.
std::vector<int> loaded_buffers(const Expr& e);
// Calls f on every Load node of e (a subtree shared by several parents once per parent).
void walk_loads(const Expr& e, const std::function<void(const Expr&)>& f);

// ---- rewriting ---------------------------------------------------------------
// Replace Vars by expressions. Returns the same node when nothing changed.
Expr substitute(const Expr& e, const std::unordered_map<int, Expr>& vars);
// Replace every use of the node `from` (by identity) by `to`.
Expr replace(const Expr& e, const ExprNode* from, const Expr& to);

// The text form (expr_text.h), without Load dtypes.
std::string to_string(const Expr& e);

struct ExprHash {
  size_t operator()(const Expr& e) const { return e->hash; }
};
struct ExprEqual {
  bool operator()(const Expr& a, const Expr& b) const { return equal(a, b); }
};

}  // namespace ember
