// The elementwise vector path reads a word that only Where branches use when some lane
// of the group takes one of those branches (schedule/cuda/vector_plan.h, Word::needed):
// a cat of five operands along the innermost dim (DeepLabV3's ASPP) read
// all five for every element, 13% of copy bandwidth.
#include <cstdlib>
#include <string>
#include <vector>

#include "check.h"
#include "nvrtc_util.h"
#include "codegen/cuda/kernel.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"

using ember_test::check_compiles;

using ember_test::count;

namespace {

// Three channels-last operands of 256, 256 and 64 channels, relu'd and concatenated.
const char* kCatChannels = R"(graph {
  %0 = input(0) : bf16[2,16,16,256]{65536,4096,256,1}
  %1 = input(1) : bf16[2,16,16,256]{65536,4096,256,1}
  %2 = input(2) : bf16[2,16,16,64]{16384,1024,64,1}
  %3 = aten.relu.default(%0) : bf16[2,16,16,256]{65536,4096,256,1}
  %4 = aten.relu.default(%1) : bf16[2,16,16,256]{65536,4096,256,1}
  %5 = aten.cat.default([%3, %4, %2], 3) : bf16[2,16,16,576]{147456,9216,576,1}
  return (%5)
}
)";

// A select on data: no lane test can tell which lanes take a branch, so both are read.
const char* kSelect = R"(graph {
  %0 = input(0) : bf16[64,256]{256,1}
  %1 = input(1) : bf16[64,256]{256,1}
  %2 = input(2) : bf16[64,256]{256,1}
  %3 = aten.gt.Scalar(%0, 0) : bool[64,256]{256,1}
  %4 = aten.where.self(%3, %1, %2) : bf16[64,256]{256,1}
  return (%4)
}
)";

ember::CudaCode cuda_of(const char* text) { return ember_test::CudaPipeline(text).cuda_code; }

}  // namespace

TEST(cuda_cat_reads_each_operand_only_where_a_lane_takes_it) {
  ember::CudaCode code = cuda_of(kCatChannels);
  CHECK_EQ(code.kernels.size(), size_t{1});
  // Each operand's word is loaded under its branch's test (8 lanes of bf16).
  CHECK_EQ(count(code.source, "only if a lane's branch reads it"), 3);
  CHECK(code.source.find("iv < 256LL") != std::string::npos);   // the first operand: the group's first lane
  CHECK(code.source.find(" + 7LL") != std::string::npos);        // the last: the group's last lane
  check_compiles(code);
}

TEST(cuda_select_on_data_reads_both_operands) {
  ember::CudaCode code = cuda_of(kSelect);
  CHECK_EQ(count(code.source, "only if a lane's branch reads it"), 0);
  CHECK(code.source.find("const uint4 raw1 = *(const uint4*)") != std::string::npos);
}
