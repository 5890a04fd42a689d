// The CUDA printer: the shape each kernel gets, what it refuses, and (when NVRTC can be
// loaded: pip's nvidia-cuda-nvrtc dir in $EMBER_NVRTC_DIR, or $EMBER_NVRTC, or the loader's
// path) that the source compiles to a cubin for sm_90.
#include <cstdlib>
#include <string>

#include "check.h"
#include "codegen/cuda_kernel.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"

using ember::CudaKernelInfo;

namespace {

const char* kSoftmax = R"(graph {
  %0 = input(0) : f32[64,3000]{3000,1}
  %1 = aten.amax.default(%0, [1], true) : f32[64,1]{1,1}
  %2 = aten.sub.Tensor(%0, %1, 1) : f32[64,3000]{3000,1}
  %3 = aten.exp.default(%2) : f32[64,3000]{3000,1}
  %4 = aten.sum.dim_IntList(%3, [1], true) : f32[64,1]{1,1}
  %5 = aten.div.Tensor(%3, %4) : f32[64,3000]{3000,1}
  return (%5)
}
)";

const char* kLayerNormBf16 = R"(graph {
  %0 = input(0) : bf16[32,64]{64,1}
  %1 = input(1) : bf16[64]{1}
  %2 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[32,64]{64,1}
  %3 = aten.var_mean.correction(%2, [1], 0, true) : (f32[32,1]{1,1}, f32[32,1]{1,1})
  %4 = aten.add.Tensor(%3, 1e-05, 1) : f32[32,1]{1,1}
  %5 = aten.rsqrt.default(%4) : f32[32,1]{1,1}
  %6 = aten.sub.Tensor(%2, %3.1, 1) : f32[32,64]{64,1}
  %7 = aten.mul.Tensor(%6, %5) : f32[32,64]{64,1}
  %8 = aten.mul.Tensor(%7, %1) : f32[32,64]{64,1}
  %9 = aten._to_copy.default(%8, "bf16", none, none, none, false, none) : bf16[32,64]{64,1}
  return (%9)
}
)";

const char* kPointwise = R"(graph {
  %0 = input(0) : f16[8,300]{300,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f16[8,300]{300,1}
  %2 = aten.relu.default(%1) : f16[8,300]{300,1}
  return (%2)
}
)";

const char* kArgmax = R"(graph {
  %0 = input(0) : f32[8,100]{100,1}
  %1 = aten.argmax.default(%0, 1, false) : i64[8]{1}
  return (%1)
}
)";

ember::CudaCode cuda_of(const char* text) {
  ember_test::Pipeline p(text);
  return ember::generate_cuda(p.program, p.schedule);
}

const ember::Nvrtc* nvrtc() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("EMBER_NVRTC_DIR"); d && *d) dirs.push_back(d);
  std::string why;
  return ember::Nvrtc::load(dirs, &why);
}

void check_compiles(const ember::CudaCode& code) {
  const ember::Nvrtc* n = nvrtc();
  if (!n) return;  // no NVRTC here: the shape checks above still ran
  ember::CubinResult r = n->compile(code.source, "sm_90", "test.cu");
  CHECK(r.ok);
  if (!r.ok) std::cerr << r.log << "\n" << code.source;
  CHECK(r.cubin.size() > 4 && r.cubin.compare(0, 4, "\x7f" "ELF") == 0);
}

}  // namespace

TEST(cuda_softmax_is_one_block_per_row) {
  ember::CudaCode code = cuda_of(kSoftmax);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowBlock);
  CHECK_EQ(code.kernels[0].grid, 64u);
  CHECK(code.source.find("ember_block_reduce(") != std::string::npos);
  check_compiles(code);
}

TEST(cuda_short_layer_norm_is_one_warp_per_row_in_f32) {
  ember::CudaCode code = cuda_of(kLayerNormBf16);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::RowWarp);
  CHECK_EQ(code.kernels[0].grid, 4u);  // 32 rows, 8 a block
  CHECK(code.source.find("ember_bf2f(") != std::string::npos);
  CHECK(code.source.find("ember_f2bf(") != std::string::npos);
  check_compiles(code);
}

TEST(cuda_pointwise_is_elementwise_with_32_bit_indices) {
  ember::CudaCode code = cuda_of(kPointwise);
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Elementwise);
  CHECK(code.source.find("for (int t = ") != std::string::npos);
  // f16 buffers: 8 elements a thread, 256 threads a block, so 2,400 elements take 2 blocks;
  // a full tile unrolled, the rest element by element.
  CHECK_EQ(code.kernels[0].grid, 2u);
  CHECK(code.source.find("if (t + 1792 < 2400)") != std::string::npos);
  CHECK(code.source.find("for (int e = t; e < 2400; e += 256)") != std::string::npos);
  check_compiles(code);
}

TEST(cuda_refuses_arg_reductions_by_name) {
  bool refused = false;
  try {
    cuda_of(kArgmax);
  } catch (const ember::CudaUnsupported& e) {
    refused = std::string(e.what()).find("arg-reductions") != std::string::npos;
  }
  CHECK(refused);
}
