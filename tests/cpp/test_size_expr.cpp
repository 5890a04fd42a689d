// Size expressions and symbolic graph text (phase 1 of docs/dynamic_shapes.md).
#include <stdexcept>

#include "check.h"
#include "ir/graph.h"
#include "ir/size_expr.h"
#include "lower/lowering.h"

using namespace ember;

namespace {
const char* kSymbolic = R"(graph(s0=6, s1=5) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s0,s1,8]{8*s1,8,1}
  %3 = aten.view.default(%2, [s0*s1, 8]) : f32[s0*s1,8]{8,1}
  %4 = aten.view.default(%2, [(s0*s1*8)//4, 4]) : f32[(s0*s1*8)//4,4]{4,1}
  %5 = aten.add.Tensor(%3, 1.0, 1) : f32[s0*s1,8]{8,1}
  return (%4, %5)
}
)";
}  // namespace

TEST(size_expr_print_and_eval) {
  Expr a = binary(ExprOp::Mul, sym(0), sym(1), DType::I64);
  Expr q = binary(ExprOp::FloorDiv, binary(ExprOp::Mul, a, int_const(8), DType::I64), int_const(4), DType::I64);
  CHECK_EQ(print_size(q), std::string("s0*s1*8//4"));
  CHECK_EQ(eval_size(q, {6, 5}), int64_t(60));
  Expr d = binary(ExprOp::Sub, int_const(3), binary(ExprOp::Add, sym(0), int_const(1), DType::I64), DType::I64);
  CHECK_EQ(print_size(d), std::string("3-(s0+1)"));
  CHECK_EQ(eval_size(d, {6}), int64_t(-4));
  // Python's floor division and remainder.
  CHECK_EQ(eval_size(binary(ExprOp::FloorDiv, int_const(-7), sym(0), DType::I64), {2}), int64_t(-4));
  CHECK_EQ(eval_size(binary(ExprOp::Mod, int_const(-7), sym(0), DType::I64), {2}), int64_t(1));
  CHECK_EQ(print_size(binary(ExprOp::Max, int_const(1), sym(0), DType::I64)), std::string("max(1, s0)"));
  CHECK(is_symbolic(q) && !is_symbolic(int_const(4)));
  bool threw = false;
  try {
    eval_size(binary(ExprOp::Mod, sym(0), sym(1), DType::I64), {3, 0});
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CHECK(threw);
}

TEST(symbolic_graph_round_trips) {
  Graph g = parse_graph(kSymbolic);
  CHECK_EQ(g.symbols.size(), size_t(2));
  CHECK_EQ(g.symbols[1].hint, int64_t(5));
  const TensorType& t = g.nodes[2].outputs[0];
  CHECK_EQ(t.sizes[1], int64_t(5));  // the hint
  CHECK_EQ(t.strides[0], int64_t(40));
  CHECK_EQ(t.sym_sizes.size(), size_t(3));
  CHECK(is_symbolic(t.sym_strides[0]) && !is_symbolic(t.sym_strides[1]));
  CHECK(g.nodes[0].args[1].sym != nullptr);
  const Arg& shape = g.nodes[3].args[1];
  CHECK_EQ(shape.list[0].i, int64_t(30));
  CHECK(shape.list[0].sym != nullptr && shape.list[1].sym == nullptr);
  CHECK_EQ(g.nodes[4].outputs[0].sizes[0], int64_t(60));
  std::string printed = print_graph(g);
  CHECK_EQ(print_graph(parse_graph(printed)), printed);
  CHECK(printed.find("graph(s0=6, s1=5) {") != std::string::npos);
  CHECK(printed.find("f32[s0,s1,8]{s1*8,8,1}") != std::string::npos || printed.find("f32[s0,s1,8]{8*s1,8,1}") != std::string::npos);
  // A static graph prints exactly as before.
  Graph s = parse_graph("graph {\n  %0 = input(0) : f32[4,8]{8,1}\n  return (%0)\n}\n");
  CHECK(s.symbols.empty() && s.nodes[0].outputs[0].sym_sizes.empty());
  CHECK_EQ(print_graph(s), std::string("graph {\n  %0 = input(0) : f32[4,8]{8,1}\n  return (%0)\n}\n"));
}

TEST(symbolic_graph_errors) {
  auto fails = [](const std::string& text) {
    try {
      parse_graph(text);
    } catch (const std::invalid_argument&) {
      return true;
    }
    return false;
  };
  CHECK(fails("graph(s1=4) {\n  return ()\n}\n"));                                     // not in order
  CHECK(fails("graph(s0=4) {\n  %0 = input(0) : f32[s1]{1}\n  return (%0)\n}\n"));     // undeclared
  CHECK(fails("graph(s0=4) {\n  %0 = input(0) : f32[s0//0]{1}\n  return (%0)\n}\n"));  // divides by zero
}
