// Gathers read across the store's contiguous dim go through the tiled-transpose shape
// (schedule/cuda/transpose_plan.h): gather(x, -1, index).transpose(-1, -2) + y read its
// gathered rows one per thread (each thread of a warp a different row, 16x the bytes in
// 32-byte sectors: DeBERTa's relative-position kernel at 22% of copy bandwidth); staged,
// a block reads them along the index's own contiguous dim, where consecutive entries
// name near-consecutive values of one row.
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "codegen/cuda/kernel.h"
#include "jit/nvrtc.h"
#include "pipeline_util.h"
#include "schedule/cuda/transpose_plan.h"
#include "schedule/placement.h"

using ember::CudaKernelInfo;

namespace {

// The position-to-content term of disentangled attention: rows of 2 x 256 relative
// positions, gathered by an index with the scores' layout, transposed, added to the scores.
const char* kTransposedGather = R"(graph {
  %0 = input(0) : bf16[4,256,512]{131072,512,1}
  %1 = input(1) : i64[1,256,256]{65536,256,1}
  %2 = input(2) : bf16[4,256,256]{65536,256,1}
  %3 = aten.add.Tensor(%1, 256, 1) : i64[1,256,256]{65536,256,1}
  %4 = aten.clamp.default(%3, 0, 511) : i64[1,256,256]{65536,256,1}
  %5 = aten.expand.default(%4, [4, 256, 256], false) : i64[4,256,256]{0,256,1}
  %6 = aten.gather.default(%0, -1, %5, false) : bf16[4,256,256]{65536,256,1}
  %7 = aten.permute.default(%6, [0, 2, 1]) : bf16[4,256,256]{65536,1,256}
  %8 = aten.add.Tensor(%2, %7, 1) : bf16[4,256,256]{65536,256,1}
  return (%8)
}
)";

// The same gather not transposed: its rows follow the store, nothing to tile.
const char* kPlainGather = R"(graph {
  %0 = input(0) : bf16[4,256,512]{131072,512,1}
  %1 = input(1) : i64[1,256,256]{65536,256,1}
  %2 = input(2) : bf16[4,256,256]{65536,256,1}
  %3 = aten.expand.default(%1, [4, 256, 256], false) : i64[4,256,256]{0,256,1}
  %4 = aten.gather.default(%0, -1, %3, false) : bf16[4,256,256]{65536,256,1}
  %5 = aten.add.Tensor(%2, %4, 1) : bf16[4,256,256]{65536,256,1}
  return (%5)
}
)";

// An index along the other dim (index entries contiguous along the store): each thread's
// gathered value is in its own row wherever it is read, so no side reads it better.
const char* kGatherIndexAlongStore = R"(graph {
  %0 = input(0) : bf16[4,256,512]{131072,512,1}
  %1 = input(1) : i64[1,256,256]{65536,1,256}
  %2 = input(2) : bf16[4,256,256]{65536,256,1}
  %3 = aten.expand.default(%1, [4, 256, 256], false) : i64[4,256,256]{0,1,256}
  %4 = aten.gather.default(%0, -1, %3, false) : bf16[4,256,256]{65536,256,1}
  %5 = aten.permute.default(%4, [0, 2, 1]) : bf16[4,256,256]{65536,1,256}
  %6 = aten.add.Tensor(%2, %5, 1) : bf16[4,256,256]{65536,256,1}
  return (%6)
}
)";

std::optional<ember::TransposePlan> plan_of(const char* text) {
  ember_test::CudaPipeline p(text);
  CHECK_EQ(p.schedule.kernels.size(), size_t{1});
  ember::Placement m = ember::place_buffers(p.program, p.schedule, ember::VectorResults::InMemory);
  return ember::plan_transpose(p.program, p.schedule.kernels[0], m.in_memory);
}

}  // namespace

TEST(cuda_transposed_gather_is_staged_along_its_index) {
  auto t = plan_of(kTransposedGather);
  CHECK(t.has_value());
  if (!t) return;
  CHECK_EQ(t->staged.size(), size_t{1});
  CHECK_EQ(t->staged[0], 0);                        // the gathered buffer, not the scores
  CHECK_EQ(t->load.extent.hint(), int64_t{256});     // the index's contiguous dim
  CHECK_EQ(t->store.extent.hint(), int64_t{256});
  CHECK_EQ(t->load_lanes, 0);                        // a gather: one element an access
  CHECK_EQ(t->store_lanes, 8);
  ember::CudaCode code = ember_test::CudaPipeline(kTransposedGather).cuda_code;
  CHECK_EQ(code.kernels.size(), size_t{1});
  CHECK(code.kernels[0].shape == CudaKernelInfo::Shape::Transpose);
  CHECK(code.source.find("__shared__ float sh0[") != std::string::npos);
  std::vector<std::string> dirs;  // as test_cuda_codegen.cpp: $EMBER_NVRTC_DIR, else the loader's path
  if (const char* d = std::getenv("EMBER_NVRTC_DIR"); d && *d) dirs.push_back(d);
  std::string why;
  if (const ember::Nvrtc* n = ember::Nvrtc::load(dirs, &why)) {
    ember::CubinResult r = n->compile(code.source, "sm_90", "test.cu");
    CHECK(r.ok);
  }
}

TEST(cuda_gathers_without_a_transposed_read_keep_the_elementwise_shape) {
  CHECK(!plan_of(kPlainGather).has_value());
  CHECK(!plan_of(kGatherIndexAlongStore).has_value());
}
