// schedule_cuda: program and schedule text in, the CUDA schedule's text out
// (schedule/cuda/schedule_cuda.h: every decision the CUDA printer reads).
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;

namespace {

std::string cuda_schedule_of(const std::string& state) {
  return after(state, {"schedule_cuda"}, ember::PipelineOptions::cuda());
}

}  // namespace

TEST(schedule_cuda_a_layer_norm_as_a_warp_per_row_with_a_row_tile) {
  // Rows of 16 f32: a warp each, 8 rows a block; chunks of 4 (16 bytes), one a thread,
  // x read once into registers (it is read by all three stages).
  CHECK_EQ(cuda_schedule_of(R"IR(program(vars=6)
buf0 = input(0) : f32[4,16]{16,1}
buf1 = input(1) : f32[16]{1}
buf2 : f32[4,1]{1,1} for [v0, _] = sum f32 over [16] for [v1] of buf0[((v0 * 16) + v1)]  from %2
buf3 : f32[4,1]{1,1} for [v2, _] = sum f32 over [16] for [v3] of (sub(buf0[((v2 * 16) + v3)], div(buf2[v2], 16.0)) * sub(buf0[((v2 * 16) + v3)], div(buf2[v2], 16.0)))  from %2
buf4 : f32[4,16]{16,1} for [v4, v5] = ((sub(buf0[((v4 * 16) + v5)], where(isnan(buf3[v4]), nan, div(buf2[v4], 16.0))) * rsqrt((div(buf3[v4], 16.0) + 9.9999997473787516e-06))) * buf1[v5])  from %7 %6 %5 %2 %4 %3 %2
return buf4
schedule
kernel ember_k0 outer=[4]
  stage 0 inner=[16]: buf2(sum)
    reduce buf2[o0] = buf0[((o0 * 16) + i0)]
  stage 1 inner=[16]: buf3(sum)
    reduce buf3[o0] = (sub(buf0[((o0 * 16) + i0)], div(buf2[o0], 16.0)) * sub(buf0[((o0 * 16) + i0)], div(buf2[o0], 16.0)))
  stage 2 inner=[16]: buf4
    buf4[((o0 * 16) + i0)] = ((sub(buf0[((o0 * 16) + i0)], where(isnan(buf3[o0]), nan, div(buf2[o0], 16.0))) * rsqrt((div(buf3[o0], 16.0) + 9.9999997473787516e-06))) * buf1[i0])
)IR"),
           "kernel ember_k0: row_warp grid 1 block 256\n"
           "  buffers: args buf0 buf1 buf4; writes buf4; origins %2 %3 %4 %5 %6 %7\n"
           "  geometry: rows 4, elements 1, threads a row 32, elements a thread 1, block 256, rows a block 8\n"
           "  row tile: 4 lanes, 4 chunks, 1 slots; tiled stages 0 1 2; loads buf0[((o0 * 16) + i0)] buf1[i0]; "
           "stores buf4; cached buf0@0; kept -; aligned to 16\n");
}

TEST(schedule_cuda_a_bf16_multiply_on_the_vector_path) {
  // 8 bf16 lanes a thread (16 bytes), the weight's word the same for every row.
  CHECK_EQ(cuda_schedule_of(R"IR(program(vars=2)
buf0 = input(0) : bf16[64,1024]{1024,1}
buf1 = input(1) : bf16[1024]{1}
buf2 : bf16[64,1024]{1024,1} for [v0, v1] = bf16((f32(buf0[((v0 * 1024) + v1)]) * f32(buf1[v1])))  from %2
return buf2
schedule
kernel ember_k0 outer=[64]
  stage 0 inner=[1024]: buf2
    buf2[((o0 * 1024) + i0)] = bf16((f32(buf0[((o0 * 1024) + i0)]) * f32(buf1[i0])))
)IR"),
           "kernel ember_k0: elementwise grid 32 block 256\n"
           "  buffers: args buf0 buf1 buf2; writes buf2; origins %2\n"
           "  geometry: rows 64, elements 65536, threads a row 32, elements a thread 8, block 256, rows a block 8\n"
           "  vector path: 8 lanes along i0 (1024); stores buf2\n"
           "    word raw0 = buf0[((o0 * 1024) + i0)]\n"
           "    word raw1 = buf1[i0] invariant\n");
}

TEST(schedule_cuda_a_column_sum_of_one_row_splits_into_a_partial_launch) {
  // 4,096 rows reduced on one block would be one SM's work: 128 blocks take 32 rows
  // each first, their partials in a scratch buffer schedule_cuda adds (buf2).
  CHECK_EQ(cuda_schedule_of(R"IR(program(vars=2)
buf0 = input(0) : f32[4096,768]{768,1}
buf1 : f32[1,768]{768,1} for [_, v1] = sum f32 over [4096] for [v0] of buf0[((v0 * 768) + v1)]  from %1
return buf1:f32[768]{1}+0
schedule
kernel ember_k0 outer=[]
  stage 0 vector inner=[768,4096]: buf1(sum)
    reduce buf1[i0] = buf0[((i1 * 768) + i0)]
)IR"),
           "kernel ember_k0: row_block grid 1 block 1024\n"
           "  buffers: args buf0 buf1 buf2; writes buf1; origins %1; scratch buf2\n"
           "  geometry: rows 1, elements 1, threads a row 1024, elements a thread 1, block 256, rows a block 8\n"
           "  column split: 128 chunks on grid 128 block 768; scratch 393216 bytes; item 0 at 0\n");
}

TEST(schedule_cuda_text_and_hash_follow_every_decision) {
  const std::string state = after(R"(graph {
  %0 = input(0) : bf16[64,1024]{1024,1}
  %1 = aten.relu.default(%0) : bf16[64,1024]{1024,1}
  return (%1)
}
)", {"lower_graph", "eliminate_dead_code", "fuse", "merge_inner_dims"}, ember::PipelineOptions::cuda());
  ember::Program p = ember::parse_program(state.substr(0, state.find("\nschedule\n") + 1));
  ember::Schedule s = ember::parse_schedule(ember_test::schedule_part(state), p);
  ember::CudaSchedule rules = ember::schedule_cuda(p, s);
  ember::LaunchChoice wide;
  wide.elementwise_block = 512;
  ember::CudaSchedule tuned = ember::schedule_cuda(p, s, {wide});
  CHECK(rules.kernels[0].hash() == ember::schedule_cuda(p, s).kernels[0].hash());
  CHECK(rules.kernels[0].hash() != tuned.kernels[0].hash());
  CHECK(tuned.kernels[0].text().find("elementwise grid 16 block 512") != std::string::npos);
}
