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

// DenseNet's cat of many feature maps along the channels (innermost, channels-last): 20
// operands, more than a general decision tree may print (kMaxVersions), as one chain.
std::string cat_of(int operands) {
  std::string g = "graph {\n", list;
  for (int i = 0; i < operands; ++i) {
    g += "  %" + std::to_string(i) + " = input(" + std::to_string(i) + ") : f32[6,8]{8,1}\n";
    list += (i ? ", %" : "%") + std::to_string(i);
  }
  const std::string w = std::to_string(8 * operands), c = std::to_string(operands), r = std::to_string(operands + 1);
  g += "  %" + c + " = aten.cat.default([" + list + "], 1) : f32[6," + w + "]{" + w + ",1}\n";
  g += "  %" + r + " = aten.relu.default(%" + c + ") : f32[6," + w + "]{" + w + ",1}\n";
  g += "  return (%" + r + ")\n}\n";
  return g;
}

// Four cats of two operands, split at four different points along the row: conditions
// independent of each other, a decision tree of 16 leaves, over kMaxVersions.
const char* kFourCats = R"(graph {
  %0 = input(0) : f32[4,3]{3,1}
  %1 = input(1) : f32[4,13]{13,1}
  %2 = input(2) : f32[4,5]{5,1}
  %3 = input(3) : f32[4,11]{11,1}
  %4 = input(4) : f32[4,7]{7,1}
  %5 = input(5) : f32[4,9]{9,1}
  %6 = input(6) : f32[4,9]{9,1}
  %7 = input(7) : f32[4,7]{7,1}
  %8 = aten.cat.default([%0, %1], 1) : f32[4,16]{16,1}
  %9 = aten.cat.default([%2, %3], 1) : f32[4,16]{16,1}
  %10 = aten.cat.default([%4, %5], 1) : f32[4,16]{16,1}
  %11 = aten.cat.default([%6, %7], 1) : f32[4,16]{16,1}
  %12 = aten.add.Tensor(%8, %9) : f32[4,16]{16,1}
  %13 = aten.add.Tensor(%10, %11) : f32[4,16]{16,1}
  %14 = aten.mul.Tensor(%12, %13) : f32[4,16]{16,1}
  return (%14)
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
std::string kernels_of(const std::string& graph) {
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

TEST(c_cat_of_many_operands_runs_one_loop_per_operand) {
  std::string c = kernels_of(cat_of(20));
  CHECK_EQ(count(c, "ember_clamp_index"), 0);
  CHECK_EQ(count(c, "ember_run_end("), 19);
  CHECK_EQ(count(c, "#pragma omp simd\n"), 20);
}

TEST(c_independent_conditions_over_the_cap_keep_one_loop) {
  std::string c = kernels_of(kFourCats);
  CHECK_EQ(count(c, "ember_run_end("), 0);
  CHECK(count(c, "ember_clamp_index") > 0);
}
