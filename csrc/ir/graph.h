// The graph IR: an ATen graph as captured by Dynamo + AOTAutograd, imported as data.
//
// Text form (the import format from Python, and the form tests are written in):
//
//   graph {
//     %0 = input(0) : f32[4,8]{8,1}
//     %1 = aten.add.Tensor(%0, 1.0, 1) : f32[4,8]{8,1}
//     %2 = aten.var_mean.correction(%1, [1], none, 0, true) : (f32[4,1]{1,1}, f32[4,1]{1,1})
//     return (%1, %2.1)
//   }
//
// - Every node is in SSA order; `%n.k` is output k of a multi-output node (`%n` = `%n.0`).
// - Arguments are positional, exactly as in the op's schema with defaults filled in
//   (Python normalizes kwargs), so lowering reads them by index.
// - Floats always carry a '.', an exponent, or are inf/-inf/nan; ints never do.
// - Types give dtype, sizes and strides (in elements) as eager would produce them.
// - A trailing `internal` marks a decomposition's intermediate (Node::internal).
// - `opaque` types a tensor ember does not model (a dtype it has no kernels for, such
//   as u64 or complex; a sparse layout; a tensor on another device than the graph's,
//   such as a CPU scalar in a CUDA graph). Only ATen reads or produces it: every node
//   with an opaque operand or result runs as an ATen call, so one such value costs its
//   own ops their fusion, never the whole graph its compile.
// - Symbolic sizes (docs/dynamic_shapes.md): the header lists the symbols with their
//   hints, `graph(s0=6, s1=5) {`; `%k = sym_input(i, s0) : none` binds s0 to runtime
//   argument i; any size, stride or integer argument may be a size expression:
//   integers, symbols, + - * // %, max(a, b), min(a, b), parentheses.
//   `f32[s0,8]{8,1}`, `aten.view.default(%1, [s0*s1, 8])`.
// - `input(k)` is the k-th runtime argument of the compiled graph (parameters,
//   buffers and constants included).
// - `return (%4, %7) any_strides(0)`: the outputs at these positions reach a caller that
//   takes them with any strides (a user's inference outputs; not a training graph's saved
//   activations, whose backward was traced for the declared ones, nor an output another
//   is regenerated from). Without the suffix every output keeps its declared strides.
// - `return (%4, %7) own_layout(1)`: the outputs at these positions leave in the layout
//   ember stores them in (dense, any order of dims: channels-last activations), and the
//   caller learns it from the compiled graph's outputs (a training forward's saved
//   activations: AOTAutograd traces the backward for the strides the forward reports).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/dtype.h"
#include "ir/expr.h"

namespace ember {

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool is_tensor = true;  // false for outputs that are not tensors (printed `none`)
  bool opaque = false;    // a tensor ember does not model (printed `opaque`); no dtype, no sizes
  // Symbolic graphs: each size and stride as a size expression over the graph's
  // symbols (csrc/ir/size_expr.h); then `sizes`/`strides` hold their hints. Empty
  // when every size is a constant.
  std::vector<Expr> sym_sizes;
  std::vector<Expr> sym_strides;

  int64_t numel() const;
  // Sizes and strides as Dims: symbolic where the graph left them symbolic.
  Dims dims() const;
  Dims stride_dims() const;
};

// Thrown when a static integer is asked of a symbolic value (Arg::as_int on a
// size expression): the caller must handle the symbolic case or give up on the op.
struct SymbolicValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

struct ValueRef {
  int node = -1;
  int index = 0;
  bool operator==(const ValueRef& o) const { return node == o.node && index == o.index; }
};

struct Arg {
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, List, Tensor };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<Arg> list;
  ValueRef ref;
  Expr sym;  // Int: a size expression over the graph's symbols (then i is its hint), or null

  static Arg none() { return Arg(); }
  static Arg of_bool(bool v);
  static Arg of_int(int64_t v);
  static Arg of_float(double v);
  static Arg of_str(std::string v);
  static Arg of_list(std::vector<Arg> v);
  static Arg of_tensor(ValueRef r);

  bool is_none() const { return kind == Kind::None; }
  bool is_tensor() const { return kind == Kind::Tensor; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const;             // Int/Float/Bool
  int64_t as_int() const;               // Int/Bool; throws otherwise (SymbolicValue if symbolic)
  std::vector<int64_t> as_ints() const; // List of Int (or a single Int)
  Dim as_dim() const;                   // Int, static or symbolic
  Dims as_dims() const;                 // List of Int (or a single Int), static or symbolic
};

struct Node {
  int id = 0;
  std::string op;  // "input" or an ATen overload name such as "aten.add.Tensor"
  std::vector<Arg> args;
  std::vector<TensorType> outputs;
  // An intermediate of one eager op's decomposition (text: ` internal` after the
  // types): eager computes it inside one kernel and never rounds it, so an f16/bf16
  // result stays unrounded. Every other op's f16/bf16 result is rounded as eager
  // rounds it, also when fusion keeps it in a register.
  bool internal = false;
};

// A size Dynamo left symbolic. `sym_input(k, sN)` binds it to runtime argument k;
// the hint is its value in the example inputs (for heuristics only).
struct Symbol {
  std::string name;  // s0, s1, ... in order
  int64_t hint = 0;
};

struct Graph {
  std::vector<Symbol> symbols;  // empty unless some size is symbolic
  std::vector<Node> nodes;
  std::vector<Arg> outputs;
  // Positions in `outputs` the caller takes with any strides (`any_strides(..)` in the
  // text), ascending: ember may return a view with other strides (lower/pad_matmuls.h).
  std::vector<int> any_strides_outputs;
  bool output_takes_any_strides(int position) const;
  // Positions in `outputs` that leave in ember's layout (`own_layout(..)`), ascending.
  std::vector<int> own_layout_outputs;
  bool output_has_own_layout(int position) const;
  std::vector<int64_t> hints() const;  // the symbols' hints, in order

  const TensorType& type_of(ValueRef r) const { return nodes.at(r.node).outputs.at(r.index); }
};

std::string print_graph(const Graph& g);
// The graph with every symbol at the given value (its hint: the static graph a compile
// of the example sizes would see); generic_paths.h compares the schedules.
Graph specialize(Graph g, const std::vector<int64_t>& values);
// Throws std::invalid_argument with a line/column on malformed text.
Graph parse_graph(const std::string& text);
std::string print_type(const TensorType& t);

}  // namespace ember
