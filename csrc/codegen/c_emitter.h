// The C expression printer: turns Exprs into statements in nested loop scopes.
//
// Every non-leaf node becomes one `const T tN = ...;` statement, printed once per
// scope where it is visible (CSE by structural equality), and placed in the
// outermost open scope whose loop variables it uses (loop-invariant hoisting).
// Both dialects print with it: the C printer (codegen/c/) and the CUDA printer
// (codegen/cuda/), whose prelude gives the names it prints device definitions.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/dim.h"
#include "ir/expr.h"

namespace ember {

class CEmitter {
 public:
  // Buffer access: how a buffer id is named and typed in the generated code.
  struct BufferRef {
    std::string name;
    DType dtype;
    Dim extent = 0;  // elements addressable from the base pointer
  };

  explicit CEmitter(std::unordered_map<int, BufferRef> buffers) : buffers_(std::move(buffers)) {}
  // The name buffer `b` has in the generated code (it must be one the emitter reads).
  const std::string& buffer_name(int b) const { return buffers_.at(b).name; }

  // Scope 0 is the function body. open_scope() starts a nested scope binding the
  // given vars (to the given C names); close_scope() returns its statements.
  void open_scope(const std::vector<std::pair<int, std::string>>& vars);
  std::vector<std::string> close_scope();
  int depth() const { return static_cast<int>(scopes_.size()) - 1; }
  // Statements hoisted all the way out of the loops (loads at constant indices).
  const std::vector<std::string>& function_lines() const { return scopes_.front().lines; }
  void line(const std::string& text) { scopes_.back().lines.push_back(text); }

  // A value computed elsewhere (a fused producer) stands in for loads of `buffer`
  // while the current scope is open, and at `level`.
  void bind_local(int buffer, const std::string& name, int level);

  // `e` has already been computed, under `name`, for the current scope.
  void bind_value(const Expr& e, const std::string& name) { scopes_.back().memo[e] = name; }

  // Loads of these buffers are not hoisted above `level` (they are written
  // earlier in the same kernel and only valid from that point).
  void set_min_load_level(int buffer, int level) { min_load_level_[buffer] = level; }

  // Where arms that are loads (or Wheres of them) print inside the select, so that only
  // the taken arm loads: a cat of four parts read every part for each element, three of
  // them clamped into other parts' memory (4x the compulsory reads). The CUDA printer's
  // choice: a select of values the C compiler vectorizes reads every arm there.
  void set_taken_arm_loads(bool on) { taken_arm_loads_ = on; }

  // A float product that an add or sub takes together with a statistic (a value that
  // depends on a load of a buffer `statistic` marks: a reduction's result or one derived
  // from it) prints rounded, __fmul_rn / __dmul_rn, which ptxas never contracts into an
  // fma: `x * y - mean` of one element is exactly 0 in eager, and fma(x, y, -mean) is the
  // product's rounding error, which var divides by n - correction = 0 and layer_norm
  // multiplies by 1 / sqrt(eps) (GPU fuzz seeds 1703, 24099, 25939). The CUDA printer's
  // choice, so that NVRTC may contract everywhere else (--fmad=true, csrc/jit/nvrtc.cpp).
  void set_statistics(std::vector<bool> statistic) { statistic_ = std::move(statistic); }

  // Symbols (docs/dynamic_shapes.md) print as sym[k]: the kernel reads them from
  // the array of the call's symbol values.
  // Emits statements for e (as needed) and returns a C expression naming its value.
  std::string emit(const Expr& e);
  // A local name not used before in this function: prefix and a number.
  std::string fresh(const std::string& prefix);

  static std::string c_type(DType t);             // compute type in C
  // `ptr[index] = value;` for a buffer of dtype t (f16/bf16 stored as 16 bits).
  static std::string store_text(const std::string& ptr, const std::string& index, DType t, const std::string& value);
  // `value` (a reduction's accumulator) as the value a load of it stored as `t` gives:
  // rounded to f16/bf16, 0/1 for bool, else cast.
  static std::string as_stored(const std::string& value, DType t);
  // The lowest (or highest) value of an integer or bool type, as C text.
  static std::string lowest_or_highest(DType t, bool lowest);
  static std::string literal(const Expr& c);     // a Const as C text

 private:
  struct Scope {
    std::vector<std::string> lines;
    std::unordered_map<Expr, std::string, ExprHash, ExprEqual> memo;
  };
  int level_of(const Expr& e);
  std::string print(const Expr& e, const std::vector<std::string>& a);
  std::string guarded(const Expr& e);
  bool reads_memory(const Expr& e);  // e depends on a load (is a value, not an index)
  bool reads_statistic(const Expr& e);  // e depends on a load of a buffer statistic_ marks
  // The operand `i` of e as C: a float product rounded (__fmul_rn) when e is a float add
  // or sub whose other operand reads a statistic (set_statistics), else emit(operand).
  std::string operand(const Expr& e, size_t i);
  std::string arm(const Expr& e);  // a Where's arm (set_taken_arm_loads)
  std::string load_text(const Expr& e, const std::string& index);
  // The name of a +0 of C type c_type(t) whose value the C compiler cannot see, declared
  // at the top of the function on first use.
  std::string opaque_zero(DType t);

  std::unordered_map<int, BufferRef> buffers_;
  std::vector<Scope> scopes_ = {Scope{}};
  std::unordered_map<int, int> var_level_;
  std::unordered_map<int, std::string> var_name_;
  std::unordered_map<int, std::pair<std::string, int>> locals_;
  std::unordered_map<int, int> min_load_level_;
  // Keyed by node address; each entry holds its Expr, so that a temporary expression
  // freed after one emit() cannot leave its level to a new node at the same address.
  std::unordered_map<const ExprNode*, std::pair<Expr, int>> level_cache_;
  std::unordered_map<std::string, std::string> opaque_zeros_;  // by C type
  int counter_ = 0;
  int guarded_depth_ = 0;  // > 0 while printing the branch of a Where
  std::unordered_map<Expr, bool> reads_memory_;  // reads_memory's answers
  bool taken_arm_loads_ = false;
  std::vector<bool> statistic_;                    // by buffer id; empty: none
  std::unordered_map<Expr, bool> reads_statistic_;  // reads_statistic's answers
};

}  // namespace ember
