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

TEST(schedule_cuda_a_layer_norm_of_short_rows_packs_a_warp_with_a_row_tile) {
  // Rows of 16 f32: chunks of 4 (16 bytes), one a thread, so a row takes 4 lanes and a
  // warp 8 rows (64 a block of 8 warps); x read once into registers (it is read by all
  // three stages).
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
           "  geometry: rows 4, elements 1, threads a row 4, elements a thread 1, block 256, rows a block 64\n"
           "  row tile: 4 lanes, 4 chunks, 1 slots; tiled stages 0 1 2; loads buf0[((o0 * 16) + i0)] buf1[i0]; "
           "stores buf4; cached buf0@0; kept -; aligned to 16\n");
}

namespace {

// A bf16 LayerNorm over `rows` rows of `width` (the program and schedule fusion makes).
std::string bf16_layer_norm(int rows, int width) {
  const std::string r = std::to_string(rows), w = std::to_string(width);
  const std::string x = "f32(buf0[((o0 * " + w + ") + i0)])", mean = "div(buf2[o0], " + w + ".0)";
  return "program(vars=8)\n"
         "buf0 = input(0) : bf16[" + r + "," + w + "]{" + w + ",1}\n"
         "buf1 = input(1) : bf16[" + w + "]{1}\n"
         "buf2 : f32[" + r + ",1]{1,1} for [v0, _] = sum f32 over [" + w + "] for [v1] of f32(buf0[((v0 * " + w + ") + v1)])  from %2\n"
         "buf3 : f32[" + r + ",1]{1,1} for [v2, _] = sum f32 over [" + w + "] for [v3] of (sub(f32(buf0[((v2 * " + w +
         ") + v3)]), div(buf2[v2], " + w + ".0)) * sub(f32(buf0[((v2 * " + w + ") + v3)]), div(buf2[v2], " + w + ".0)))  from %3\n"
         "buf4 : bf16[" + r + "," + w + "]{" + w + ",1} for [v4, v5] = round_bf16(((sub(f32(buf0[((v4 * " + w +
         ") + v5)]), div(buf2[v4], " + w + ".0)) * rsqrt((div(buf3[v4], " + w + ".0) + 1e-05))) * f32(buf1[v5])))  from %4\n"
         "return buf4\n"
         "schedule\n"
         "kernel ember_k0 outer=[" + r + "]\n"
         "  stage 0 inner=[" + w + "]: buf2(sum)\n"
         "    reduce buf2[o0] = " + x + "\n"
         "  stage 1 inner=[" + w + "]: buf3(sum)\n"
         "    reduce buf3[o0] = (sub(" + x + ", " + mean + ") * sub(" + x + ", " + mean + "))\n"
         "  stage 2 inner=[" + w + "]: buf4\n"
         "    buf4[((o0 * " + w + ") + i0)] = round_bf16(((sub(" + x + ", " + mean + ") * rsqrt((div(buf3[o0], " + w +
         ".0) + 1e-05))) * f32(buf1[i0])))\n";
}

// The launch and row tile lines of a schedule's text.
std::string geometry_and_tile(const std::string& text) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.rfind("kernel ", 0) == 0 || line.rfind("  geometry", 0) == 0 || line.rfind("  row tile", 0) == 0)
      out += line.substr(0, line.find(';')) + "\n";
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

}  // namespace

TEST(schedule_cuda_short_rows_take_the_threads_that_keep_a_warp_busy) {
  // ConvNeXt's and Swin's LayerNorms: 96, 192 and 384 channels are 12, 24 and 48 chunks
  // of 8 bf16, which on a warp each left 20, 8 and 16 of its 32 lanes idle; 4, 8 and 16
  // lanes of 3 chunks each keep them all busy, 8, 4 and 2 rows a warp. 768 channels
  // fill a warp as they are.
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(bf16_layer_norm(1024, 96))),
           "kernel ember_k0: row_warp grid 16 block 256\n"
           "  geometry: rows 1024, elements 1, threads a row 4, elements a thread 1, block 256, rows a block 64\n"
           "  row tile: 8 lanes, 12 chunks, 3 slots\n");
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(bf16_layer_norm(1024, 192))),
           "kernel ember_k0: row_warp grid 32 block 256\n"
           "  geometry: rows 1024, elements 1, threads a row 8, elements a thread 1, block 256, rows a block 32\n"
           "  row tile: 8 lanes, 24 chunks, 3 slots\n");
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(bf16_layer_norm(1000, 384))),
           "kernel ember_k0: row_warp grid 63 block 256\n"
           "  geometry: rows 1000, elements 1, threads a row 16, elements a thread 1, block 256, rows a block 16\n"
           "  row tile: 8 lanes, 48 chunks, 3 slots\n");
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(bf16_layer_norm(1024, 768))),
           "kernel ember_k0: row_warp grid 128 block 256\n"
           "  geometry: rows 1024, elements 1, threads a row 32, elements a thread 1, block 256, rows a block 8\n"
           "  row tile: 8 lanes, 96 chunks, 3 slots\n");
  // 40 chunks of 8 would leave 24 of a warp's 64 slots idle (or 16 lanes' 3 slots 8):
  // chunks of 4 fill 16 lanes' 5 slots.
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(bf16_layer_norm(1024, 320))),
           "kernel ember_k0: row_warp grid 64 block 256\n"
           "  geometry: rows 1024, elements 1, threads a row 16, elements a thread 1, block 256, rows a block 16\n"
           "  row tile: 4 lanes, 80 chunks, 5 slots\n");
}

TEST(schedule_cuda_short_rows_of_a_symbolic_count_pack_a_warp_too) {
  // A softmax over 96 static columns and s0 rows: 8 rows a warp, the grid per call.
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(R"IR(program(s0=1000; vars=6)
buf0 = input(1) : bf16[s0,96]{96,1}
buf1 : f32[s0,1]{1,1} for [v0, _] = max f32 over [96] for [v1] of f32(buf0[((v0 * 96) + v1)])  from %3
buf2 : f32[s0,1]{1,1} for [v2, _] = sum f32 over [96] for [v3] of exp(min(sub(f32(buf0[((v2 * 96) + v3)]), buf1[v2]), 0.0))  from %3
buf3 : bf16[s0,96]{96,1} for [v4, v5] = bf16(div(exp(min(sub(f32(buf0[((v4 * 96) + v5)]), buf1[v4]), 0.0)), buf2[v4]))  from %3
return buf3
schedule
kernel ember_k0 outer=[s0]
  stage 0 inner=[96]: buf1(max)
    reduce buf1[o0] = f32(buf0[((o0 * 96) + i0)])
  stage 1 inner=[96]: buf2(sum)
    reduce buf2[o0] = exp(min(sub(f32(buf0[((o0 * 96) + i0)]), buf1[o0]), 0.0))
  stage 2 inner=[96]: buf3
    buf3[((o0 * 96) + i0)] = bf16(div(exp(min(sub(f32(buf0[((o0 * 96) + i0)]), buf1[o0]), 0.0)), buf2[o0]))
)IR")),
           "kernel ember_k0: row_warp grid 16 block 256 (per call: s0 / 64)\n"
           "  geometry: rows s0, elements 1, threads a row 4, elements a thread 1, block 256, rows a block 64, 64-bit indices, symbolic\n"
           "  row tile: 8 lanes, 12 chunks, 3 slots\n");
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
  // 4,096 rows reduced on one block would be one SM's work: the partial launch takes 16
  // chunks of 256 rows on 24 tiles of 32 columns (a thread 4 columns in one 16-byte load a
  // row, 32 groups of 8 threads a block), their partials in a scratch buffer schedule_cuda
  // adds (buf2).
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
           "  column split: 16 chunks on grid 384 block 256; scratch 49152 bytes; 4 columns a thread, tiles of 8 threads x "
           "24, 32 row groups a block; item 0 at 0\n");
}

TEST(schedule_cuda_a_narrow_column_sum_of_one_row_splits_into_groups_of_lanes) {
  // 64 columns (a training BatchNorm's channels-last statistics): 256 chunks of 256 rows,
  // each on 2 blocks of 32 columns, 32 groups of rows a block; a thread per column and a
  // block per chunk would keep 128 x 64 threads busy.
  CHECK_EQ(cuda_schedule_of(R"IR(program(vars=2)
buf0 = input(0) : f32[65536,64]{64,1}
buf1 : f32[1,64]{64,1} for [_, v1] = sum f32 over [65536] for [v0] of buf0[((v0 * 64) + v1)]  from %1
return buf1:f32[64]{1}+0
schedule
kernel ember_k0 outer=[]
  stage 0 vector inner=[64,65536]: buf1(sum)
    reduce buf1[i0] = buf0[((i1 * 64) + i0)]
)IR"),
           "kernel ember_k0: row_block grid 1 block 1024\n"
           "  buffers: args buf0 buf1 buf2; writes buf1; origins %1; scratch buf2\n"
           "  geometry: rows 1, elements 1, threads a row 1024, elements a thread 1, block 256, rows a block 8\n"
           "  column split: 256 chunks on grid 512 block 256; scratch 131072 bytes; 4 columns a thread, tiles of 8 threads "
           "x 2, 32 row groups a block; item 0 at 0\n");
}

TEST(schedule_cuda_a_channels_last_mean_of_few_images_splits_into_a_partial_launch) {
  // A global average pool of 64 channels-last images (EfficientNet's squeeze-excitation):
  // a block per image would leave 32 of its threads busy, each walking 12,544 pixels.
  // The partial launch takes 9 blocks an image, each a chunk of 1,394 pixels walked by 64
  // groups of 4 threads, 8 channels a thread in one 16-byte load a pixel; the kernel
  // combines each channel's 9 partials.
  CHECK_EQ(cuda_schedule_of(R"IR(program(vars=4)
buf0 = input(0) : bf16[64,32,112,112]{401408,1,3584,32}
buf1 : f32[64,32,1,1]{32,1,1,1} for [v0, v1, _, _] = sum f32 over [112, 112] for [v2, v3] of f32(buf0[((((v0 * 401408) + v1) + (v2 * 3584)) + (v3 * 32))])  from %1
return buf1:f32[64,32]{32,1}+0
schedule
kernel ember_k0 outer=[64]
  stage 0 vector inner=[32,12544]: buf1(sum)
    reduce buf1[((o0 * 32) + i0)] = f32(buf0[(((o0 * 401408) + i0) + (i1 * 32))])
)IR"),
           "kernel ember_k0: row_block grid 64 block 1024\n"
           "  buffers: args buf0 buf1 buf2; writes buf1; origins %1; scratch buf2\n"
           "  geometry: rows 64, elements 1, threads a row 1024, elements a thread 1, block 256, rows a block 8\n"
           "  column split: 9 chunks on grid 576 block 256; scratch 147456 bytes; 8 columns a thread, tiles of 4 threads x "
           "1, 64 row groups a block; item 0 at 0\n");
}

TEST(schedule_cuda_a_column_sum_of_many_rows_is_not_split) {
  // 256 images: a block each already fills the GPU.
  const std::string text = cuda_schedule_of(R"IR(program(vars=4)
buf0 = input(0) : bf16[256,32,56,56]{100352,1,1792,32}
buf1 : f32[256,32,1,1]{32,1,1,1} for [v0, v1, _, _] = sum f32 over [56, 56] for [v2, v3] of f32(buf0[((((v0 * 100352) + v1) + (v2 * 1792)) + (v3 * 32))])  from %1
return buf1:f32[256,32]{32,1}+0
schedule
kernel ember_k0 outer=[256]
  stage 0 vector inner=[32,3136]: buf1(sum)
    reduce buf1[((o0 * 32) + i0)] = f32(buf0[(((o0 * 100352) + i0) + (i1 * 32))])
)IR");
  CHECK(text.find("column split") == std::string::npos);
}

TEST(schedule_cuda_short_gathered_rows_share_a_warp) {
  // A sum over two gathered rows (Mixtral's top-2 experts): no row tile (the loads are
  // gathers), so a warp a row would leave 30 of its 32 lanes idle. Two lanes a row, 16
  // rows a warp.
  const std::string text = after(R"(graph {
  %0 = input(0) : f32[64,1024]{1024,1}
  %1 = input(1) : i64[16,2]{2,1}
  %2 = aten.index.Tensor(%0, [%1]) : f32[16,2,1024]{2048,1024,1}
  %3 = aten.sum.dim_IntList(%2, [1], false) : f32[16,1024]{1024,1}
  return (%3)
}
)", {"lower_graph", "eliminate_dead_code", "fuse", "merge_inner_dims", "schedule_cuda"}, ember::PipelineOptions::cuda());
  CHECK(text.find("kernel ember_k0: row_warp grid 128 block 256\n") != std::string::npos);
  CHECK(text.find("geometry: rows 16384, elements 1, threads a row 2, elements a thread 1, block 256, rows a block 128\n") !=
        std::string::npos);
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

namespace {

// ConvNeXt's LayerNorm after a downsampling convolution: the convolution's output plus
// its bias (rounded as eager's bf16 convolution rounds it) is a value of its own, buf3,
// which all three stages read; `outputs` are what the graph returns.
std::string layer_norm_of_a_computed_value(const std::string& outputs) {
  const std::string v = "buf3[((o0 * 96) + i0)]", mean = "div(buf4[o0], 96.0)";
  return "program(vars=8)\n"
         "buf0 = input(0) : bf16[1024,96]{96,1}\n"
         "buf1 = input(1) : bf16[96]{1}\n"
         "buf2 = input(2) : bf16[96]{1}\n"
         "buf3 : f32[1024,96]{96,1} for [v0, v1] = f32(round_bf16((f32(buf0[((v0 * 96) + v1)]) + f32(buf1[v1]))))  from %3\n"
         "buf4 : f32[1024,1]{1,1} for [v2, _] = sum f32 over [96] for [v3] of buf3[((v2 * 96) + v3)]  from %4\n"
         "buf5 : f32[1024,1]{1,1} for [v4, _] = sum f32 over [96] for [v5] of (sub(buf3[((v4 * 96) + v5)], div(buf4[v4], 96.0)) * "
         "sub(buf3[((v4 * 96) + v5)], div(buf4[v4], 96.0)))  from %4\n"
         "buf6 : bf16[1024,96]{96,1} for [v6, v7] = round_bf16(((sub(buf3[((v6 * 96) + v7)], div(buf4[v6], 96.0)) * "
         "rsqrt((div(buf5[v6], 96.0) + 1e-06))) * f32(buf2[v7])))  from %5\n"
         "return " + outputs + "\n"
         "schedule\n"
         "kernel ember_k0 outer=[1024]\n"
         "  stage 0 inner=[96]: buf3 buf4(sum)\n"
         "    buf3[((o0 * 96) + i0)] = f32(round_bf16((f32(buf0[((o0 * 96) + i0)]) + f32(buf1[i0]))))\n"
         "    reduce buf4[o0] = " + v + "\n"
         "  stage 1 inner=[96]: buf5(sum)\n"
         "    reduce buf5[o0] = (sub(" + v + ", " + mean + ") * sub(" + v + ", " + mean + "))\n"
         "  stage 2 inner=[96]: buf6\n"
         "    buf6[((o0 * 96) + i0)] = round_bf16(((sub(" + v + ", " + mean + ") * rsqrt((div(buf5[o0], 96.0) + 1e-06))) * "
         "f32(buf2[i0])))\n";
}

}  // namespace

TEST(schedule_cuda_a_value_only_its_kernel_reads_stays_in_registers) {
  // buf3 is read by the later stages alone, which the row tile serves from registers:
  // it is not stored (8 bytes an element moved instead of 4: the bf16 row in, the bf16
  // LayerNorm out), and no longer an f32 access, so chunks of 8 bf16 (4 lanes of 3
  // chunks, 8 rows a warp) instead of 4.
  CHECK_EQ(cuda_schedule_of(layer_norm_of_a_computed_value("buf6")),
           "kernel ember_k0: row_warp grid 16 block 256\n"
           "  buffers: args buf0 buf1 buf2 buf6; writes buf6; origins %3 %4 %5\n"
           "  geometry: rows 1024, elements 1, threads a row 4, elements a thread 1, block 256, rows a block 64\n"
           "  row tile: 8 lanes, 12 chunks, 3 slots; tiled stages 0 1 2; loads buf0[((o0 * 96) + i0)] buf1[i0] buf2[i0]; "
           "stores buf6; cached; kept buf3; registers only buf3; aligned to 16\n");
  // Returned, the value is stored (and read back from registers all the same).
  CHECK_EQ(geometry_and_tile(cuda_schedule_of(layer_norm_of_a_computed_value("buf6, buf3"))),
           "kernel ember_k0: row_warp grid 32 block 256\n"
           "  geometry: rows 1024, elements 1, threads a row 8, elements a thread 1, block 256, rows a block 32\n"
           "  row tile: 4 lanes, 24 chunks, 3 slots\n");
}

TEST(schedule_cuda_scans_along_a_middle_dim_run_as_columns) {
  // cumsum and logcumsumexp over the 300 steps of [4, 300, 96]: 384 rows, each a column
  // of the tensor (steps 96 elements apart). Consecutive threads take consecutive rows
  // (the stores' coefficient of o1 is 1), and the 300 steps split into 16 segments of 19
  // (384 rows x 16 is still below kScanThreadsWanted; a segment stays at least 16 long).
  const std::string state = R"IR(program(vars=6)
buf0 = input(0) : bf16[4,300,96]{28800,96,1}
buf1 : bf16[4,300,96]{28800,96,1} for [v0, _, v2] = scan sum f32 along 1 over [300] for [v1] of f32(buf0[(((v0 * 28800) + (v1 * 96)) + v2)])  from %1
buf2 : bf16[4,300,96]{28800,96,1} for [v3, _, v5] = scan logsumexp f32 along 1 over [300] for [v4] of f32(buf0[(((v3 * 28800) + (v4 * 96)) + v5)])  from %2
return buf1, buf2
schedule
kernel ember_k0 outer=[4,96]
  stage 0 inner=[300]: buf1(scan sum) buf2(scan logsumexp)
    scan buf1[(((o0 * 28800) + (i0 * 96)) + o1)] = f32(buf0[(((o0 * 28800) + (i0 * 96)) + o1)])
    scan buf2[(((o0 * 28800) + (i0 * 96)) + o1)] = f32(buf0[(((o0 * 28800) + (i0 * 96)) + o1)])
)IR";
  CHECK_EQ(cuda_schedule_of(state),
           "kernel ember_k0: scan_columns grid 12 block 512\n"
           "  buffers: args buf0 buf1 buf2; writes buf1 buf2; origins %1 %2\n"
           "  geometry: rows 384, elements 1, threads a row 1, elements a thread 1, block 256, rows a block 32\n"
           "  scan columns: 16 segments of 19 along 300, 32 columns a block; carried items 0 1\n");
}

TEST(schedule_cuda_a_scan_along_the_contiguous_dim_keeps_the_row_loop) {
  // The same scan along the last dim: a row is contiguous along the scan, consecutive
  // rows are 300 elements apart, so columns would not coalesce.
  const std::string state = R"IR(program(vars=3)
buf0 = input(0) : f32[8,300]{300,1}
buf1 : f32[8,300]{300,1} for [v0, _] = scan sum f64 along 1 over [300] for [v1] of f64(buf0[((v0 * 300) + v1)])  from %1
return buf1
schedule
kernel ember_k0 outer=[8]
  stage 0 inner=[300]: buf1(scan sum)
    scan buf1[((o0 * 300) + i0)] = f64(buf0[((o0 * 300) + i0)])
)IR";
  const std::string text = cuda_schedule_of(state);
  CHECK(text.find("row_warp") != std::string::npos);
  CHECK(text.find("scan columns") == std::string::npos);
}

TEST(schedule_cuda_a_scan_of_a_scan_runs_as_columns_of_one_segment) {
  // cumsum(cumsum(x)) along a middle dim: the second scan's segment totals would need
  // the first one's carry, so each column is scanned whole (no pass 1), 256 columns a
  // block (384 rows: 2 blocks).
  const std::string state = R"IR(program(vars=6)
buf0 = input(0) : f32[4,300,96]{28800,96,1}
buf1 : f32[4,300,96]{28800,96,1} for [v0, _, v2] = scan sum f64 along 1 over [300] for [v1] of f64(buf0[(((v0 * 28800) + (v1 * 96)) + v2)])  from %1
buf2 : f32[4,300,96]{28800,96,1} for [v3, _, v5] = scan sum f64 along 1 over [300] for [v4] of f64(buf1[(((v3 * 28800) + (v4 * 96)) + v5)])  from %2
return buf2
schedule
kernel ember_k0 outer=[4,96]
  stage 0 inner=[300]: buf1(scan sum) buf2(scan sum)
    scan buf1[(((o0 * 28800) + (i0 * 96)) + o1)] = f64(buf0[(((o0 * 28800) + (i0 * 96)) + o1)])
    scan buf2[(((o0 * 28800) + (i0 * 96)) + o1)] = f64(buf1[(((o0 * 28800) + (i0 * 96)) + o1)])
)IR";
  CHECK_EQ(cuda_schedule_of(state),
           "kernel ember_k0: scan_columns grid 2 block 256\n"
           "  buffers: args buf0 buf2; writes buf2; origins %1 %2\n"
           "  geometry: rows 384, elements 1, threads a row 1, elements a thread 1, block 256, rows a block 256\n"
           "  scan columns: 1 segments of 300 along 300, 256 columns a block; carried items 0 1\n");
}
