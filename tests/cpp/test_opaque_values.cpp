// Values ember does not model (graph type `opaque`: a u64 or complex tensor, a tensor on
// another device): the ops that read or make them run in ATen, the rest still fuses.
#include "check.h"
#include "pipeline_util.h"

using namespace ember;
using ember_test::Pipeline;

namespace {

// x * 2 fuses with the relu; y is made u64 and back by ATen, then added in a kernel.
const char* kGraph = R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = input(1) : opaque
  %2 = aten.mul.Tensor(%0, 2) : f32[4,8]{8,1}
  %3 = aten.relu.default(%2) : f32[4,8]{8,1}
  %4 = aten._to_copy.default(%1, "opaque", none, none, none, false, none) : opaque
  %5 = aten._to_copy.default(%4, "f32", none, none, none, false, none) : f32[4,8]{8,1}
  %6 = aten.add.Tensor(%3, %5, 1) : f32[4,8]{8,1}
  return (%6, %4)
}
)";

}  // namespace

TEST(opaque_type_prints_as_it_parses) {
  Graph g = parse_graph(kGraph);
  CHECK(g.nodes[1].outputs[0].opaque);
  CHECK(g.nodes[4].outputs[0].opaque);
  CHECK(!g.nodes[5].outputs[0].opaque);
  CHECK_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
  CHECK(print_graph(g).find("%1 = input(1) : opaque") != std::string::npos);
}

TEST(ops_on_opaque_values_are_externs_and_the_rest_fuses) {
  Pipeline p(kGraph);
  CHECK_EQ(p.program_text(),
           "program(vars=2)\n"
           "buf0 = input(0) : f32[4,8]{8,1}\n"
           "buf1 = input(1) : opaque\n"
           "extern %4 aten._to_copy.default(%1 = buf1) -> buf2 : opaque  "
           "\"its result is a tensor ember does not model (dtype, layout or device)\"\n"
           "extern %5 aten._to_copy.default(%4 = buf2) -> buf3 : f32[4,8]{8,1}  "
           "\"it reads a tensor ember does not model (dtype, layout or device)\"\n"
           "buf4 : f32[4,8]{8,1} for [v0, v1] = (max((buf0[((v0 * 8) + v1)] * 2.0), 0.0) + buf3[((v0 * 8) + v1)])  from %6 %3 %2\n"
           "return buf4, buf2\n");
  // The program text parses back (opaque buffers included).
  CHECK_EQ(ember_test::after(p.program_text(), {}), p.program_text());
  CHECK_EQ(p.schedule.kernels.size(), 1u);
  CHECK(p.program.buffers[1].opaque && p.program.buffers[2].opaque && !p.program.buffers[3].opaque);
  // The extern reading the opaque input passes it as it is: no layout copy of it.
  CHECK_EQ(p.program.externs[0].tensor_views.size(), 1u);
  CHECK_EQ(p.program.externs[0].tensor_views[0].buffer, 1);
}
