// eliminate_dead_code: program text in, program text out.
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;

TEST(dead_code_drops_buffers_nothing_reads) {
  // buf1 feeds only buf2, which no output reads: both leave the steps (printed `dead`,
  // their ids kept).
  CHECK_EQ(after(R"IR(program(vars=3)
buf0 = input(0) : f32[8]{1}
buf1 : f32[8]{1} for [v0] = exp(buf0[v0])  from %1
buf2 : f32[8]{1} for [v1] = neg(buf1[v1])  from %2
buf3 : f32[8]{1} for [v2] = (buf0[v2] * 2.0)  from %3
return buf3
)IR", {"eliminate_dead_code"}),
           "program(vars=3)\n"
           "buf0 = input(0) : f32[8]{1}\n"
           "buf3 : f32[8]{1} for [v2] = (buf0[v2] * 2.0)  from %3\n"
           "dead buf1 : f32[8]{1} for [v0] = exp(buf0[v0])  from %1\n"
           "dead buf2 : f32[8]{1} for [v1] = neg(buf1[v1])  from %2\n"
           "return buf3\n");
}

TEST(dead_code_keeps_what_an_extern_call_reads) {
  const char* program = R"IR(program(vars=4)
buf0 = input(0) : f32[4,4]{4,1}
buf1 : f32[4,4]{4,1} for [v0, v1] = max(buf0[((v0 * 4) + v1)], 0.0)  from %1
extern %2 aten.mm.default(%1 = buf1, %1 = buf1) -> buf2 : f32[4,4]{4,1}  "matmul: ATen (BLAS)"
buf3 : f32[4,4]{4,1} for [v2, v3] = neg(buf2[((v2 * 4) + v3)])  from %3
return buf3
)IR";
  CHECK_EQ(after(program, {"eliminate_dead_code"}), after(program, {}));
}

TEST(dead_code_unused_pool_indices) {
  // max_pool2d_with_indices whose indices nobody reads: the unrolled indices are dead.
  const std::string program = after(R"(graph {
  %0 = input(0) : f32[1,2,4,4]{32,16,4,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [2, 2], [2, 2], [0, 0], [1, 1], false) : (f32[1,2,2,2]{8,4,2,1}, i64[1,2,2,2]{8,4,2,1})
  return (%1)
}
)", {"lower_graph", "eliminate_dead_code"});
  CHECK(program.find("\nbuf1 : f32[1,2,2,2]") != std::string::npos);
  CHECK(program.find("\ndead buf2 : i64[1,2,2,2]") != std::string::npos);
}
