// codegen/c/row_prefetch.cpp: a row loop that gathers a table row through an index read
// per row prefetches the rows a few rows ahead; other row loops print no prefetch.
#include <string>

#include "check.h"
#include "pipeline_util.h"

using ember_test::Pipeline;

using ember_test::count;

namespace {


// BART's embeddings: tokens gathered by id, learned positions at (row + 2), LayerNorm.
const char* kEmbeddingLayerNorm = R"(graph {
  %0 = input(0) : i64[2,64]{64,1}
  %1 = input(1) : f32[1000,128]{128,1}
  %2 = input(2) : f32[1026,128]{128,1}
  %3 = input(3) : f32[128]{1}
  %4 = input(4) : f32[128]{1}
  %5 = aten.arange.start_step(0, 64, 1, none, "strided", "cpu", false) : i64[64]{1}
  %6 = aten.expand.default(%5, [2, -1], false) : i64[2,64]{0,1}
  %7 = aten.add.Tensor(%6, 2, 1) : i64[2,64]{64,1}
  %8 = aten.embedding.default(%1, %0, 1, false, false) : f32[2,64,128]{8192,128,1}
  %9 = aten.embedding.default(%2, %7, -1, false, false) : f32[2,64,128]{8192,128,1}
  %10 = aten.add.Tensor(%8, %9, 1) : f32[2,64,128]{8192,128,1}
  %11 = aten.var_mean.correction(%10, [2], 0, true) : (f32[2,64,1]{64,1,1}, f32[2,64,1]{64,1,1})
  %12 = aten.add.Tensor(%11, 1.0000000000000001e-05, 1) : f32[2,64,1]{64,1,1}
  %13 = aten.rsqrt.default(%12) : f32[2,64,1]{64,1,1}
  %14 = aten.sub.Tensor(%10, %11.1, 1) : f32[2,64,128]{8192,128,1}
  %15 = aten.mul.Tensor(%14, %13) : f32[2,64,128]{8192,128,1}
  %16 = aten.mul.Tensor(%15, %3) : f32[2,64,128]{8192,128,1}
  %17 = aten.add.Tensor(%16, %4, 1) : f32[2,64,128]{8192,128,1}
  return (%17)
}
)";

}  // namespace

// The token table's row (read through the ids) is prefetched 4 rows ahead, its 128 floats
// a line (16 floats) at a time, once a row; the positions' rows (no index load) are not.
TEST(row_prefetch_fetches_gathered_rows_ahead) {
  Pipeline p(kEmbeddingLayerNorm);
  const std::string& c = p.c_code.source;
  CHECK_EQ(count(c, "__builtin_prefetch("), 1);
  CHECK_EQ(count(c, "if (x + 4LL < end) {"), 1);
  CHECK_EQ(count(c, "for (int64_t c = 0; c < 128LL; c += 16) __builtin_prefetch(&a1["), 1);
  // The ids of the row ahead: its own coordinates, bound in the block.
  CHECK(c.find("const int64_t p1 = xa % 64LL;") != std::string::npos);
}

// No index load, no prefetch: a residual add + LayerNorm reads its rows as streams.
TEST(row_prefetch_leaves_streamed_rows_alone) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[128,128]{128,1}
  %1 = input(1) : f32[128,128]{128,1}
  %2 = aten.add.Tensor(%0, %1, 1) : f32[128,128]{128,1}
  %3 = aten.var_mean.correction(%2, [1], 0, true) : (f32[128,1]{1,1}, f32[128,1]{1,1})
  %4 = aten.add.Tensor(%3, 1e-05, 1) : f32[128,1]{1,1}
  %5 = aten.rsqrt.default(%4) : f32[128,1]{1,1}
  %6 = aten.sub.Tensor(%2, %3.1, 1) : f32[128,128]{128,1}
  %7 = aten.mul.Tensor(%6, %5) : f32[128,128]{128,1}
  return (%7)
}
)");
  CHECK_EQ(count(p.c_code.source, "__builtin_prefetch("), 0);
}

// A gathered row shorter than 256 bytes (32 floats) is left to the caches.
TEST(row_prefetch_skips_short_rows) {
  Pipeline p(R"(graph {
  %0 = input(0) : i64[64]{1}
  %1 = input(1) : f32[1000,32]{32,1}
  %2 = aten.embedding.default(%1, %0, -1, false, false) : f32[64,32]{32,1}
  %3 = aten.var_mean.correction(%2, [1], 0, true) : (f32[64,1]{1,1}, f32[64,1]{1,1})
  %4 = aten.sub.Tensor(%2, %3.1, 1) : f32[64,32]{32,1}
  return (%4)
}
)");
  CHECK_EQ(count(p.c_code.source, "__builtin_prefetch("), 0);
}
