// The C printer splits a pointwise loop at the points where a Where's integer condition,
// linear in the loop var, changes (codegen/c/branch_runs.cpp): one loop per arm, each
// reading only its own operand, unclamped. A cat along the innermost dim read every
// operand for each element, through indices clamped into range.
#include <string>

#include "check.h"
#include "pipeline_util.h"

using ember_test::count;

namespace {

// Three operands of odd widths concatenated along the innermost dim, then relu'd.
const char* kCatInner = R"(graph {
  %0 = input(0) : f32[4,17]{17,1}
  %1 = input(1) : f32[4,30]{30,1}
  %2 = input(2) : f32[4,5]{5,1}
  %3 = aten.cat.default([%0, %1, %2], 1) : f32[4,52]{52,1}
  %4 = aten.relu.default(%3) : f32[4,52]{52,1}
  return (%4)
}
)";

// shufflenet_v2's channel shuffle: the cat's condition is fixed for each row (a channel).
const char* kShuffle = R"(graph {
  %0 = input(0) : f32[2,6,4,8]{192,32,8,1}
  %1 = input(1) : f32[2,6,4,8]{192,32,8,1}
  %2 = aten.cat.default([%0, %1], 1) : f32[2,12,4,8]{384,32,8,1}
  %3 = aten.view.default(%2, [2, 2, 6, 4, 8]) : f32[2,2,6,4,8]{384,192,32,8,1}
  %4 = aten.transpose.int(%3, 1, 2) : f32[2,6,2,4,8]{384,32,192,8,1}
  %5 = aten.clone.default(%4) : f32[2,6,2,4,8]{384,64,32,8,1}
  %6 = aten.view.default(%5, [2, 12, 4, 8]) : f32[2,12,4,8]{384,32,8,1}
  %7 = aten.relu.default(%6) : f32[2,12,4,8]{384,32,8,1}
  return (%7)
}
)";

// A select on data: no run can tell which arm an element takes.
const char* kSelect = R"(graph {
  %0 = input(0) : f32[64,256]{256,1}
  %1 = input(1) : f32[64,256]{256,1}
  %2 = input(2) : f32[64,256]{256,1}
  %3 = aten.gt.Scalar(%0, 0) : bool[64,256]{256,1}
  %4 = aten.where.self(%3, %1, %2) : f32[64,256]{256,1}
  return (%4)
}
)";


// The kernels' text, without the prelude (which defines the helpers it counts).
std::string kernels_of(const char* graph) {
  const std::string& s = ember_test::Pipeline(graph).c_code.source;
  return s.substr(s.find("/* ember_"));
}

}  // namespace

TEST(c_cat_along_inner_dim_runs_one_loop_per_operand) {
  std::string c = kernels_of(kCatInner);
  CHECK_EQ(count(c, "ember_clamp_index"), 0);
  CHECK_EQ(count(c, "ember_run_end("), 2);          // two conditions move along the row
  CHECK_EQ(count(c, "#pragma omp simd\n"), 3);       // three loops, vectorized
  CHECK_EQ(count(c, " ? t"), 0);                     // no select left
}

TEST(c_channel_shuffle_picks_its_operand_once_a_row) {
  std::string c = kernels_of(kShuffle);
  CHECK_EQ(count(c, "ember_clamp_index"), 0);
  CHECK_EQ(count(c, "ember_run_end("), 0);           // the condition is fixed for the row
  CHECK_EQ(count(c, "#pragma omp simd\n"), 2);
}

TEST(c_select_on_data_keeps_one_loop) {
  std::string c = kernels_of(kSelect);
  CHECK_EQ(count(c, "ember_run_end("), 0);
  CHECK(c.find(" ? t") != std::string::npos);
}
