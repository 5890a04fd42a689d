// find_generic_paths: a graph with symbols against its static twins (specialize), and
// the cost rule that keeps a symbolic graph's realize decisions those of its twin.
#include "check.h"
#include "generic_paths.h"
#include "pipeline_util.h"

using ember_test::Pipeline;

namespace {

std::string paths_of(const ember::Compiled& c) { return ember::generic_paths_text(c.generic_paths); }

size_t computed(const std::string& graph_text, const std::vector<int64_t>* values = nullptr) {
  const std::string text = values ? ember::print_graph(ember::specialize(ember::parse_graph(graph_text), *values))
                                  : graph_text;
  return Pipeline(text).program.computed.size();
}

}  // namespace

TEST(specialize_puts_every_symbol_at_a_value) {
  const ember::Graph g = ember::specialize(ember::parse_graph(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s0,s1,8]{8*s1,8,1}
  %3 = aten.view.default(%2, [s0*s1, 8]) : f32[s0*s1,8]{8,1}
  return (%3)
}
)"), {5, 7});
  CHECK(g.symbols.empty());
  CHECK_EQ(ember::print_type(g.nodes[2].outputs[0]), "f32[5,7,8]{56,8,1}");
  CHECK_EQ(ember::print_type(g.nodes[3].outputs[0]), "f32[35,8]{8,1}");
  CHECK_EQ(g.nodes[3].args[1].list[0].i, 35);
  CHECK(!g.nodes[3].args[1].list[0].sym);
}

TEST(a_row_softmax_over_symbolic_rows_has_no_generic_path) {
  const Pipeline p(R"(graph(s0=6) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f32[s0,64]{64,1}
  %2 = aten._softmax.default(%1, -1, false) : f32[s0,64]{64,1}
  return (%2)
}
)");
  CHECK_EQ(paths_of(p), "");
}

TEST(a_column_sum_over_a_symbolic_kept_dim_is_a_generic_path) {
  // With the kept dim static (16 or 32) the sum is a vector stage; symbolic, a row one.
  const Pipeline p(R"(graph(s0=16, s1=64) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s1,s0]{s0,1}
  %3 = aten.sum.dim_IntList(%2, [0], false, none) : f32[s0]{1}
  return (%3)
}
)");
  CHECK_EQ(paths_of(p), "ember_red_sum_0: buf1: a row reduction where static sizes make a vector one (s0 symbolic)\n");
}

TEST(a_static_graph_has_no_generic_path_pass) {
  const Pipeline p(R"(graph {
  %0 = input(0) : f32[64,16]{16,1}
  %1 = aten.sum.dim_IntList(%0, [0], false, none) : f32[16]{1}
  return (%1)
}
)");
  CHECK(p.generic_paths.empty());
}

TEST(symbolic_index_arithmetic_costs_what_its_static_twin_does) {
  // A residual add read by an RMS norm's sum and its output (Llama's): cheap enough to
  // recompute at static sizes, so it is not stored; its symbolic twin's indices
  // (v0 * (128 * s1)) must not make it look costlier.
  const char* kResidualNorm = R"(graph(s0=4, s1=32) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s0,s1,128]{128*s1,128,1}
  %3 = input(3) : f32[s0,s1,128]{128*s1,128,1}
  %4 = aten.add.Tensor(%2, %3, 1) : f32[s0,s1,128]{128*s1,128,1}
  %5 = aten.mul.Tensor(%4, %4) : f32[s0,s1,128]{128*s1,128,1}
  %6 = aten.mean.dim(%5, [-1], true, none) : f32[s0,s1,1]{s1,1,1}
  %7 = aten.rsqrt.default(%6) : f32[s0,s1,1]{s1,1,1}
  %8 = aten.mul.Tensor(%4, %7) : f32[s0,s1,128]{128*s1,128,1}
  return (%8)
}
)";
  const std::vector<int64_t> hints = {4, 32};
  CHECK_EQ(computed(kResidualNorm), computed(kResidualNorm, &hints));
  CHECK_EQ(paths_of(Pipeline(kResidualNorm)), "");
}

TEST(an_op_a_symbol_keeps_from_lowering_is_named) {
  // as_strided needs static sizes: ATen runs it with symbols, ember at static sizes.
  const Pipeline p(R"(graph(s0=4) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f32[s0,8]{8,1}
  %2 = aten.mul.Tensor(%1, 2.0) : f32[s0,8]{8,1}
  %3 = aten.as_strided.default(%2, [s0, 4], [8, 2], 0) : f32[s0,4]{8,2}
  %4 = aten.add.Tensor(%3, 1.0, 1) : f32[s0,4]{4,1}
  return (%4)
}
)");
  CHECK(paths_of(p).find("graph: aten.as_strided.default left to ATen") != std::string::npos);
}
