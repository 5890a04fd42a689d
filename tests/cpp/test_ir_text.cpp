// The IR texts: expressions, programs and schedules print and parse back, malformed
// text is refused with its line and column, and the verifiers catch a broken IR.
#include <cmath>

#include "check.h"
#include "ir/expr_text.h"
#include "lower/verify_program.h"
#include "pipeline_util.h"
#include "schedule/verify_schedule.h"

using namespace ember;
using ember_test::after;

namespace {

const char* kGraph = R"(graph(s0=6) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f16[s0,8]{8,1}
  %2 = input(2) : f32[8]{1}
  %3 = aten._to_copy.default(%1, "f32", none, none, none, false, none) : f32[s0,8]{8,1}
  %4 = aten.add.Tensor(%3, %2, 1) : f32[s0,8]{8,1}
  %5 = aten.cumsum.default(%4, 1, none) : f32[s0,8]{8,1}
  %6 = aten.amax.default(%5, [1], true) : f32[s0,1]{1,1}
  %7 = aten.mm.default(%5, %5) : f32[s0,8]{8,1}
  return (%6, %7)
}
)";

Expr parse_one(const std::string& text, const std::vector<DType>& dtypes) {
  TextReader in(text, "expression");
  Expr e = parse_expr(in, dtypes);
  if (!in.at_end()) in.error("trailing text");
  return e;
}

}  // namespace

TEST(expr_text_round_trips_node_for_node) {
  const std::vector<DType> dtypes = {DType::F16, DType::I64};
  const Expr x = load(0, add(mul(var(inner_var(0)), 8), var(outer_var(1))), DType::F16);
  const Expr cases[] = {
      binary(ExprOp::Add, cast(x, DType::F32), float_const(2.0), DType::F32),
      rounding_cast(unary(ExprOp::Exp, cast(x, DType::F32), DType::F32), DType::BF16),
      where(binary(ExprOp::Lt, load(1, var(3), DType::I64), int_const(5), DType::Bool), float_const(NAN), float_const(-1e-30)),
      binary(ExprOp::Max, int_const(3, DType::I32), int_const(-7, DType::I32), DType::I32),
      binary(ExprOp::Mul, sym(0), int_const(4), DType::I64),
      unary(ExprOp::IsNan, float_const(INFINITY, DType::F64), DType::Bool),
      binary(ExprOp::Add, load(1, var(0), DType::F32), float_const(0.1, DType::F64), DType::F64),
  };
  for (const Expr& e : cases) {
    const std::string text = print_expr(e, &dtypes);
    CHECK(equal(parse_one(text, dtypes), e));
    CHECK_EQ(print_expr(parse_one(text, dtypes), &dtypes), text);
  }
  CHECK_EQ(print_expr(cases[0], &dtypes), "(f32(buf0[((i0 * 8) + o1)]) + 2.0)");
  CHECK_EQ(print_expr(cases[1], &dtypes), "round_bf16(exp(f32(buf0[((i0 * 8) + o1)])))");
  CHECK_EQ(print_expr(cases[6], &dtypes), "(buf1[v0]:f32 + 0.10000000000000001:f64):f64");
}

TEST(program_and_schedule_texts_print_back_the_same) {
  for (const auto& target : {PipelineOptions::cpu(), PipelineOptions::cuda()}) {
    const std::string program = after(kGraph, {"lower_graph", "eliminate_dead_code"}, target);
    CHECK(program.rfind("program(s0=6; vars=", 0) == 0);
    CHECK_EQ(after(program, {}, target), program);
    const std::string state = after(program, {"fuse", "merge_inner_dims"}, target);
    CHECK_EQ(after(state, {}, target), state);
    // What the pipeline generates from the graph, the passes generate from the texts.
    const std::string generate = target.target == Target::CPU ? "generate_c" : "generate_cuda";
    std::vector<std::string> rest = {"fuse", "merge_inner_dims"};
    if (target.target == Target::CPU) rest.push_back("split_reductions");
    else rest.push_back("merge_symbolic_outer_dims");
    rest.push_back(generate);
    const std::string from_graph = after(kGraph, [&] {
      std::vector<std::string> all = {"lower_graph", "eliminate_dead_code"};
      all.insert(all.end(), rest.begin(), rest.end());
      return all;
    }(), target);
    CHECK_EQ(after(program, rest, target), from_graph);
  }
}

TEST(malformed_ir_text_is_refused_with_its_place) {
  auto error_of = [](const std::string& text) {
    try {
      run_passes(text, {});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_EQ(error_of("program(vars=1)\nbuf0 = input(0) : f32[4]{1}\nbuf1 : f32[4]{1} for [v0] = exp(buf0[v0]\nreturn buf1\n"),
           std::string("program text 3:41: expected ')'"));
  CHECK_EQ(error_of("program(vars=1)\nbuf1 : f32[4]{1} for [v0] = 1.0\nreturn buf1\n"),
           std::string("program text: buf0 is not declared"));
  CHECK_EQ(error_of("program(vars=1)\nbuf0 = input(0) : f32[4]{1}\nreturn buf0\nschedule\nstage 0 inner=[4]:\n"),
           std::string("program text 1:1: expected a kernel or an extern call"));
}

TEST(verifiers_catch_a_broken_ir) {
  auto violation = [](const std::string& text) {
    try {
      after(text, {});
    } catch (const std::logic_error& e) {
      return std::string(e.what());
    }
    return std::string("none");
  };
  // A load of a buffer before the step that computes it.
  CHECK_EQ(violation("program(vars=2)\nbuf0 = input(0) : f32[4]{1}\nbuf1 : f32[4]{1} for [v0] = exp(buf2[v0])\n"
                     "buf2 : f32[4]{1} for [v1] = buf0[v1]\nreturn buf1\n"),
           std::string("ember: invalid program after parsing: buf1 reads buf2 before a step computes it"));
  // A body that uses another buffer's var.
  CHECK_EQ(violation("program(vars=2)\nbuf0 = input(0) : f32[4]{1}\nbuf1 : f32[4]{1} for [v0] = buf0[v1]\nreturn buf1\n"),
           std::string("ember: invalid program after parsing: buf1: its body uses v1, not its own var"));
  // A kernel that reads a buffer a later stage computes.
  CHECK_EQ(violation("program(vars=2)\nbuf0 = input(0) : f32[4]{1}\nbuf1 : f32[4]{1} for [v0] = buf0[v0]\n"
                     "buf2 : f32[4]{1} for [v1] = buf1[v1]\nreturn buf2\nschedule\nkernel k outer=[4]\n"
                     "  stage 0 inner=[]: buf2\n    buf2[o0] = buf1[o0]\n  stage 1 inner=[]: buf1\n    buf1[o0] = buf0[o0]\n"),
           std::string("ember: invalid schedule after parsing: buf2 reads buf1 before its stage has computed it"));
  // Every computed buffer in a kernel.
  CHECK_EQ(violation("program(vars=1)\nbuf0 = input(0) : f32[4]{1}\nbuf1 : f32[4]{1} for [v0] = buf0[v0]\n"
                     "return buf1\nschedule\nkernel k outer=[]\n"),
           std::string("ember: invalid schedule after parsing: buf1 is in no kernel"));
}

TEST(a_prepared_extern_argument_prints_back_and_must_be_a_graph_input) {
  // ExternCall::prepared_args as text (`buf1 prepared`), and the verifier's rule: what the
  // runtime prepares is a graph input as the caller passes it.
  const std::string program =
      "program(vars=0)\n"
      "buf0 = input(0) : f32[2,4,8,8]{256,1,32,4}\n"
      "buf1 = input(1) : f32[8,4,3,3]{36,9,3,1}\n"
      "extern %2 aten.convolution.default(%0 = buf0, %1 = buf1 prepared) -> buf2 : f32[2,8,6,6]{288,1,48,8}  \"conv\"\n"
      "return buf2\n";
  CHECK_EQ(after(program, {}), program);
  const Program p = parse_program(program);
  CHECK(p.externs.at(0).prepared_args == std::vector<int>{1});
  std::string violation = "none";
  try {
    after("program(vars=4)\nbuf0 = input(0) : f32[2,4,8,8]{256,1,32,4}\nbuf1 = input(1) : f32[8,4,3,3]{36,9,3,1}\n"
          "buf2 : f32[8,4,3,3]{36,9,3,1} for [v0, v1, v2, v3] = neg(buf1[((((v0 * 36) + (v1 * 9)) + (v2 * 3)) + v3)])\n"
          "extern %3 aten.convolution.default(%0 = buf0, %2 = buf2 prepared) -> buf3 : f32[2,8,6,6]{288,1,48,8}  \"conv\"\n"
          "return buf3\n",
          {});
  } catch (const std::logic_error& e) {
    violation = e.what();
  }
  CHECK_EQ(violation, std::string("ember: invalid program after parsing: extern aten.convolution.default: prepared "
                                  "argument 1 is not a graph input as passed"));
}

TEST(graph_text_round_trips_the_outputs_that_take_any_strides) {
  const std::string text = R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = aten.exp.default(%0) : f32[4,8]{8,1}
  %2 = aten.neg.default(%0) : f32[4,8]{8,1}
  return (%1, %2, %1) any_strides(0, 2)
}
)";
  const Graph g = parse_graph(text);
  CHECK(g.output_takes_any_strides(0) && !g.output_takes_any_strides(1) && g.output_takes_any_strides(2));
  CHECK_EQ(print_graph(g), text);
  std::string error = "no error";
  try {
    parse_graph("graph {\n  %0 = input(0) : f32[4]{1}\n  return (%0) any_strides(1)\n}\n");
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  CHECK(error.find("any_strides lists output positions in ascending order") != std::string::npos);
}

TEST(graph_text_round_trips_the_outputs_in_embers_own_layout) {
  const std::string text = R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = aten.exp.default(%0) : f32[4,8]{8,1}
  %2 = aten.neg.default(%0) : f32[4,8]{8,1}
  return (%1, %2, %1) any_strides(0) own_layout(1, 2)
}
)";
  const Graph g = parse_graph(text);
  CHECK(!g.output_has_own_layout(0) && g.output_has_own_layout(1) && g.output_has_own_layout(2));
  CHECK_EQ(print_graph(g), text);
  std::string error = "no error";
  try {
    parse_graph("graph {\n  %0 = input(0) : f32[4]{1}\n  return (%0, %0) own_layout(1, 0)\n}\n");
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  CHECK(error.find("own_layout lists output positions in ascending order") != std::string::npos);
}
