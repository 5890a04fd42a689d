// Softmax rows with a broadcast operand on CUDA (issue 23: BLOOM's and DeBERTa's masked
// softmax, Falcon's safe softmax, Swin's relative-position bias): the row tile keeps in
// registers what its first stages compute and later stages would compute again (the
// masked or biased input; exp(x - max)), so a mask is read and a bias gathered once an
// element, and exp runs once; Swin's 49-wide rows take 8 threads, 4 rows a warp. The
// source compiles with NVRTC where it can be loaded (test_cuda_codegen.cpp says how).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "check.h"
#include "nvrtc_util.h"
#include "codegen/cuda/kernel.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"

using ember_test::check_compiles;

using ember::CudaKernelInfo;

namespace {

// Scores of [4,16,512,512] plus a causal mask broadcast over the heads, softmax in f32,
// back to bf16 (BLOOM once its baddbmm stays whole; DeBERTa's masked softmax likewise).
const char* kMaskedSoftmax = R"(graph {
  %0 = input(0) : bf16[4,16,512,512]{4194304,262144,512,1}
  %1 = input(1) : bf16[4,1,512,512]{262144,262144,512,1}
  %2 = aten.add.Tensor(%0, %1, 1) : bf16[4,16,512,512]{4194304,262144,512,1}
  %3 = aten._to_copy.default(%2, "f32", none, none, none, false, none) : f32[4,16,512,512]{4194304,262144,512,1}
  %4 = aten._softmax.default(%3, -1, false) : f32[4,16,512,512]{4194304,262144,512,1}
  %5 = aten._to_copy.default(%4, "bf16", none, none, none, false, none) : bf16[4,16,512,512]{4194304,262144,512,1}
  return (%5)
}
)";

// Swin's window attention: 49-wide rows of bf16 scores plus a relative-position bias
// gathered from a [169, heads] table through a [2401] index, broadcast over the windows.
const char* kSwinSoftmax = R"(graph {
  %0 = input(0) : bf16[169,3]{3,1}
  %1 = input(1) : i64[2401]{1}
  %2 = input(2) : bf16[4096,3,49,49]{7203,2401,49,1}
  %3 = aten.index.Tensor(%0, [%1]) : bf16[2401,3]{3,1}
  %4 = aten.view.default(%3, [49, 49, -1]) : bf16[49,49,3]{147,3,1}
  %5 = aten.permute.default(%4, [2, 0, 1]) : bf16[3,49,49]{1,147,3}
  %6 = aten.clone.default(%5, "contiguous_format") : bf16[3,49,49]{2401,49,1}
  %7 = aten.unsqueeze.default(%6, 0) : bf16[1,3,49,49]{7203,2401,49,1}
  %8 = aten.add.Tensor(%2, %7, 1) : bf16[4096,3,49,49]{7203,2401,49,1}
  %9 = aten._softmax.default(%8, -1, false) : bf16[4096,3,49,49]{7203,2401,49,1}
  return (%9)
}
)";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// The mask is read once an element (both rows are cached: stage 0's vector loads, not
// again in the sum's and the output's stages) and exp runs once an element (the sum's,
// kept for the division): one in the aligned tile, one in its element-by-element
// fallback, besides the prelude's definition.
TEST(cuda_masked_softmax_reads_its_mask_once_and_exps_once) {
  ember::CudaCode code = ember_test::CudaPipeline(kMaskedSoftmax).cuda_code;
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(k.row_lanes, 8u);
  CHECK_EQ(k.row_slots, 2u);
  CHECK(code.source.find("float value0[16];") != std::string::npos);
  CHECK_EQ(count(code.source, "*(const uint4*)(b1 + "), size_t{1});  // the mask, by chunks
  CHECK_EQ(count(code.source, "ember_expf("), size_t{3});
  check_compiles(code);
}

// The bias is gathered once an element (index, then table: stage 0 only), exp runs once,
// and a row takes 8 threads of 7 slots (49 of 56 busy), 4 rows a warp, not a warp of 2
// slots (49 of 64).
TEST(cuda_swin_softmax_gathers_its_bias_once_on_8_threads_a_row) {
  ember::CudaCode code = ember_test::CudaPipeline(kSwinSoftmax).cuda_code;
  CHECK_EQ(code.kernels.size(), size_t{1});
  const CudaKernelInfo& k = code.kernels[0];
  CHECK(k.shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(k.row_lanes, 1u);
  CHECK_EQ(k.row_slots, 7u);
  CHECK(code.source.find("const int tid = threadIdx.x & 7;") != std::string::npos);
  CHECK_EQ(count(code.source, "= b1["), size_t{1});
  CHECK_EQ(count(code.source, "ember_bf2f(b0["), size_t{1});
  CHECK_EQ(count(code.source, "ember_expf("), size_t{2});  // with the prelude's definition
  check_compiles(code);
}
