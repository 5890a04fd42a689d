// plan_arena: program and schedule text in, the memory plan out. The pass alone: it
// reads the kernels' arguments from the C printer's output (CPU) or the CUDA schedule,
// and makes them itself when the state has none (run_passes.cpp).
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;

TEST(memory_plan_reuses_the_bytes_of_dead_intermediates) {
  // relu's result (buf2) is read by the first matmul only, tanh's (buf4) by the second:
  // never alive together, they share the arena's bytes. Extern results are the ATen
  // calls' own; the output leaves the graph.
  CHECK_EQ(after(R"IR(program(vars=6)
buf0 = input(0) : f32[4,8]{8,1}
buf1 = input(1) : f32[8,8]{8,1}
buf2 : f32[4,8]{8,1} for [v0, v1] = max(buf0[((v0 * 8) + v1)], 0.0)  from %2
extern %3 aten.mm.default(%2 = buf2, %1 = buf1) -> buf3 : f32[4,8]{8,1}  "matmul: ATen (BLAS)"
buf4 : f32[4,8]{8,1} for [v2, v3] = tanh(buf3[((v2 * 8) + v3)])  from %4
extern %5 aten.mm.default(%4 = buf4, %1 = buf1) -> buf5 : f32[4,8]{8,1}  "matmul: ATen (BLAS)"
buf6 : f32[4,8]{8,1} for [v4, v5] = exp(buf5[((v4 * 8) + v5)])  from %6
return buf6
schedule
kernel ember_k0 outer=[4]
  stage 0 inner=[8]: buf2
    buf2[((o0 * 8) + i0)] = max(buf0[((o0 * 8) + i0)], 0.0)
extern %3 aten.mm.default  # matmul: ATen (BLAS)
kernel ember_k1 outer=[4]
  stage 0 inner=[8]: buf4
    buf4[((o0 * 8) + i0)] = tanh(buf3[((o0 * 8) + i0)])
extern %5 aten.mm.default  # matmul: ATen (BLAS)
kernel ember_k2 outer=[4]
  stage 0 inner=[8]: buf6
    buf6[((o0 * 8) + i0)] = exp(buf5[((o0 * 8) + i0)])
)IR", {"plan_arena"}),
           "arena 128 bytes\n"
           "  buf2 at 0\n"
           "  buf4 at 0\n");
}

TEST(memory_plan_places_a_column_splits_scratch) {
  // CUDA: the partials' scratch buffer schedule_cuda adds is an intermediate like any other.
  CHECK_EQ(after(R"IR(program(vars=2)
buf0 = input(0) : f32[4096,768]{768,1}
buf1 : f32[1,768]{768,1} for [_, v1] = sum f32 over [4096] for [v0] of buf0[((v0 * 768) + v1)]  from %1
return buf1:f32[768]{1}+0
schedule
kernel ember_k0 outer=[]
  stage 0 vector inner=[768,4096]: buf1(sum)
    reduce buf1[i0] = buf0[((i1 * 768) + i0)]
)IR", {"plan_arena"}, ember::PipelineOptions::cuda()),
           "arena 49152 bytes\n"
           "  buf2 at 0\n"
           "ember_k0: row_block grid 1 block 1024 (column split: partials on grid 384 block 256)\n");
}
