// pad_matmuls: matmul operands padded to 16-byte leading dims, as before/expected text.
// Values are checked end to end in tests/python/test_pad_matmuls.py.
#include <limits>

#include "check.h"
#include "lower/pad_matmuls.h"
#include "pipeline_util.h"

using namespace ember;

namespace {

// No size thresholds nor cost model, and graph inputs copied by kernels like any operand:
// small graphs get padded, so that the copies the pass makes can be read.
PadMatmulOptions always() {
  PadMatmulOptions o;
  o.min_macs = o.min_intensity = 0;
  o.copy_bytes_per_s = std::numeric_limits<double>::infinity();
  o.pad_inputs_once = false;
  return o;
}
const PadMatmulOptions kAlways = always();

PipelineOptions padding(PadMatmulOptions pad) {
  PipelineOptions o;
  o.pad_matmuls = true;
  o.pad = pad;
  return o;
}

// The CPU pipeline with pad_matmuls after lowering (fusion and codegen must accept what
// the pass makes).
struct Padded : ember_test::Pipeline {
  explicit Padded(const std::string& text, PadMatmulOptions opts = kAlways) : Pipeline(text, padding(opts)) {}
  std::string text() const { return program_text(); }
};

}  // namespace

TEST(pad_matmuls_pads_n_of_a_transposed_weight_and_copies_the_slice) {
  // GPT-2's LM head: x @ wte^T with an odd vocabulary. wte^T is column-major, so its
  // leading dim (16) is aligned already; N (13) is the result's and is padded: wte^T
  // gets zero columns (a copy that stays column-major), and the graph's result is a
  // copy of the wider result's slice.
  Padded p(R"(graph {
  %0 = input(0) : bf16[4,16]{16,1}
  %1 = input(1) : bf16[13,16]{16,1}
  %2 = aten.permute.default(%1, [1, 0]) : bf16[16,13]{1,16}
  %3 = aten.mm.default(%0, %2) : bf16[4,13]{13,1}
  return (%3)
}
)");
  CHECK_EQ(p.text(),
           "program(vars=4)\n"
           "buf0 = input(0) : bf16[4,16]{16,1}\n"
           "buf1 = input(1) : bf16[13,16]{16,1}\n"
           "buf3 : bf16[16,16]{1,16} for [v0, v1] order [1, 0] = where(lt(v1, 13), buf1[(v0 + (v1 * 16))], 0.0:bf16)\n"
           "extern %3 aten.mm.default(%0 = buf0, %2 = buf3) -> buf4 : bf16[4,16]{16,1}  \"matmul: ATen (BLAS); padded for 16-byte leading dims (N 13->16): copies of b; result sliced by a copy\"\n"
           "buf2 : bf16[4,13]{13,1} for [v2, v3] = buf4[((v2 * 16) + v3)]\n"
           "return buf2\n");
  CHECK(p.program.buffers[4].kind == Buffer::Kind::Extern);
  CHECK_EQ(print_dims(p.program.buffers[4].sizes), "[4,16]");
  CHECK_EQ(print_dims(p.program.externs[0].tensor_views[1].strides), "[1,16]");
  CHECK(p.program.buffers[2].kind == Buffer::Kind::Computed);
  // The copy reads wte in memory order: one row of wte (16 contiguous) per inner loop.
  CHECK_EQ(p.schedule_text(),
           "kernel ember_poi_copy_0 outer=[16]\n"
           "  stage 0 inner=[16]: buf3\n"
           "    buf3[(i0 + (o0 * 16))] = where(lt(o0, 13), buf1[(i0 + (o0 * 16))], 0.0:bf16)\n"
           "extern %3 aten.mm.default  # matmul: ATen (BLAS); padded for 16-byte leading dims (N 13->16): copies of b; result sliced by a copy\n"
           "kernel ember_poi_copy_1 outer=[4]\n"
           "  stage 0 inner=[13]: buf2\n"
           "    buf2[((o0 * 13) + i0)] = buf4[((o0 * 16) + i0)]\n");
}

TEST(pad_matmuls_backward_pads_k_and_m_sharing_one_copy_of_the_gradient) {
  // The LM head's backward: grad @ W (K odd: grad and W get zero columns / rows) and
  // grad^T @ x (M odd and the leading dim of the column-major grad^T). Both pad the
  // same memory the same way: one copy of grad. The second result only grows by rows.
  Padded p(R"(graph {
  %0 = input(0) : bf16[16,13]{13,1}
  %1 = input(1) : bf16[13,8]{8,1}
  %2 = input(2) : bf16[16,8]{8,1}
  %3 = aten.mm.default(%0, %1) : bf16[16,8]{8,1}
  %4 = aten.permute.default(%0, [1, 0]) : bf16[13,16]{1,13}
  %5 = aten.mm.default(%4, %2) : bf16[13,8]{8,1}
  return (%3, %5)
}
)");
  CHECK_EQ(p.text(),
           "program(vars=4)\n"
           "buf0 = input(0) : bf16[16,13]{13,1}\n"
           "buf1 = input(1) : bf16[13,8]{8,1}\n"
           "buf2 = input(2) : bf16[16,8]{8,1}\n"
           "buf5 : bf16[16,16]{16,1} for [v0, v1] = where(lt(v1, 13), buf0[((v0 * 13) + v1)], 0.0:bf16)\n"
           "buf6 : bf16[16,8]{8,1} for [v2, v3] = where(lt(v2, 13), buf1[((v2 * 8) + v3)], 0.0:bf16)\n"
           "extern %3 aten.mm.default(%0 = buf5, %1 = buf6) -> buf3 : bf16[16,8]{8,1}  \"matmul: ATen (BLAS); padded for 16-byte leading dims (K 13->16): copies of a, b\"\n"
           "extern %5 aten.mm.default(%4 = buf5:bf16[16,16]{1,16}+0, %2 = buf2) -> buf4 : bf16[16,8]{8,1}  \"matmul: ATen (BLAS); padded for 16-byte leading dims (M 13->16): copies of a (shared); result grows\"\n"
           "return buf3, buf4:bf16[13,8]{8,1}+0\n");
  const auto& second = p.program.externs[1].tensor_views[0];
  CHECK_EQ(second.buffer, 5);
  CHECK_EQ(print_dims(second.sizes) + print_dims(second.strides), "[16,16][1,16]");
  CHECK_EQ(print_dims(p.program.buffers[4].sizes) + print_dims(p.program.buffers[4].strides), "[16,8][8,1]");
  CHECK_EQ(print_dims(p.program.outputs[1].view.sizes), "[13,8]");
}

TEST(pad_matmuls_pads_an_addmm_bias_with_the_columns) {
  Padded p(R"(graph {
  %0 = input(0) : f16[6,8]{8,1}
  %1 = input(1) : f16[5,8]{8,1}
  %2 = input(2) : f16[5]{1}
  %3 = aten.permute.default(%1, [1, 0]) : f16[8,5]{1,8}
  %4 = aten.addmm.default(%2, %0, %3, 1, 1) : f16[6,5]{5,1}
  return (%4)
}
)");
  CHECK_EQ(p.text(),
           "program(vars=5)\n"
           "buf0 = input(0) : f16[6,8]{8,1}\n"
           "buf1 = input(1) : f16[5,8]{8,1}\n"
           "buf2 = input(2) : f16[5]{1}\n"
           "buf4 : f16[8,8]{1,8} for [v0, v1] order [1, 0] = where(lt(v1, 5), buf1[(v0 + (v1 * 8))], 0.0:f16)\n"
           "buf5 : f16[8]{1} for [v2] = where(lt(v2, 5), buf2[v2], 0.0:f16)\n"
           "extern %4 aten.addmm.default(%2 = buf5, %0 = buf0, %3 = buf4) -> buf6 : f16[6,8]{8,1}  \"matmul: ATen (BLAS); padded for 16-byte leading dims (N 5->8): copies of b, bias; result sliced by a copy\"\n"
           "buf3 : f16[6,5]{5,1} for [v3, v4] = buf6[((v3 * 8) + v4)]\n"
           "return buf3\n");
}

TEST(pad_matmuls_pads_m_of_a_transposed_bmm_operand_per_batch) {
  // A batched result whose rows grow changes its batch stride: it is sliced by a copy.
  Padded p(R"(graph {
  %0 = input(0) : bf16[2,8,3]{24,3,1}
  %1 = input(1) : bf16[2,8,16]{128,16,1}
  %2 = aten.permute.default(%0, [0, 2, 1]) : bf16[2,3,8]{24,1,3}
  %3 = aten.bmm.default(%2, %1) : bf16[2,3,16]{48,16,1}
  return (%3)
}
)");
  CHECK_EQ(p.text(),
           "program(vars=6)\n"
           "buf0 = input(0) : bf16[2,8,3]{24,3,1}\n"
           "buf1 = input(1) : bf16[2,8,16]{128,16,1}\n"
           "buf3 : bf16[2,8,8]{64,1,8} for [v0, v1, v2] order [0, 2, 1] = where(lt(v1, 3), buf0[(((v0 * 24) + v1) + (v2 * 3))], 0.0:bf16)\n"
           "extern %3 aten.bmm.default(%2 = buf3, %1 = buf1) -> buf4 : bf16[2,8,16]{128,16,1}  \"matmul: ATen (BLAS); padded for 16-byte leading dims (M 3->8): copies of a; result sliced by a copy\"\n"
           "buf2 : bf16[2,3,16]{48,16,1} for [v3, v4, v5] = buf4[(((v3 * 128) + (v4 * 16)) + v5)]\n"
           "return buf2\n");
  CHECK_EQ(print_dims(p.program.externs[0].tensor_views[0].strides), "[64,1,8]");
}

TEST(pad_matmuls_leaves_small_and_memory_bound_gemms_and_says_why) {
  Padded small(R"(graph {
  %0 = input(0) : bf16[5,7]{7,1}
  %1 = input(1) : bf16[7,9]{9,1}
  %2 = aten.mm.default(%0, %1) : bf16[5,9]{9,1}
  return (%2)
}
)", PadMatmulOptions{});
  CHECK_EQ(small.text(),
           "program(vars=0)\n"
           "buf0 = input(0) : bf16[5,7]{7,1}\n"
           "buf1 = input(1) : bf16[7,9]{9,1}\n"
           "extern %2 aten.mm.default(%0 = buf0, %1 = buf1) -> buf2 : bf16[5,9]{9,1}  \"matmul: ATen (BLAS); not padded (K 7->8, N 9->16): 315 multiply-adds, under 2^27\"\n"
           "return buf2\n");
  // A few rows times GPT-2's LM head (decoding): 2^28 multiply-adds, but 7.9 per element
  // moved; copying the weight would cost as much as the GEMM.
  Padded decode(R"(graph {
  %0 = input(0) : bf16[8,768]{768,1}
  %1 = input(1) : bf16[50257,768]{768,1}
  %2 = aten.permute.default(%1, [1, 0]) : bf16[768,50257]{1,768}
  %3 = aten.mm.default(%0, %2) : bf16[8,50257]{50257,1}
  return (%3)
}
)", PadMatmulOptions{});
  CHECK_EQ(decode.program.externs[0].reason,
           "matmul: ATen (BLAS); not padded (N 50257->50264): memory-bound, 7 multiply-adds per element, under 32");
  CHECK_EQ(decode.program.computed.size(), 0u);
}

TEST(pad_matmuls_leaves_aligned_other_dtypes_and_repeated_operands) {
  Padded p(R"(graph {
  %0 = input(0) : f64[5,7]{7,1}
  %1 = aten.mm.default(%0, %0) : f64[5,7]{7,1}
  %2 = input(1) : bf16[7,7]{7,1}
  %3 = aten.mm.default(%2, %2) : bf16[7,7]{7,1}
  %4 = input(2) : f32[8,8]{8,1}
  %5 = aten.mm.default(%4, %4) : f32[8,8]{8,1}
  return (%1, %3, %5)
}
)");
  // f64: no aligned cuBLAS kernels to reach. x @ x: Python binds an extern's arguments by
  // value, so one value cannot become two different padded copies. f32 8x8: aligned.
  CHECK_EQ(p.text(),
           "program(vars=0)\n"
           "buf0 = input(0) : f64[5,7]{7,1}\n"
           "buf2 = input(1) : bf16[7,7]{7,1}\n"
           "buf4 = input(2) : f32[8,8]{8,1}\n"
           "extern %1 aten.mm.default(%0 = buf0, %0 = buf0) -> buf1 : f64[5,7]{7,1}  \"matmul: ATen (BLAS)\"\n"
           "extern %3 aten.mm.default(%2 = buf2, %2 = buf2) -> buf3 : bf16[7,7]{7,1}  \"matmul: ATen (BLAS); not padded (K 7->8, N 7->8): one value is two of its operands\"\n"
           "extern %5 aten.mm.default(%4 = buf4, %4 = buf4) -> buf5 : f32[8,8]{8,1}  \"matmul: ATen (BLAS)\"\n"
           "return buf1, buf3, buf5\n");
}

TEST(pad_matmuls_copies_a_misaligned_view_of_aligned_sizes) {
  // a is a column slice of a wider matrix: sizes aligned (8x8), row stride 13 is not.
  Padded p(R"(graph {
  %0 = input(0) : bf16[8,13]{13,1}
  %1 = input(1) : bf16[8,8]{8,1}
  %2 = aten.slice.Tensor(%0, 1, 0, 8, 1) : bf16[8,8]{13,1}
  %3 = aten.mm.default(%2, %1) : bf16[8,8]{8,1}
  return (%3)
}
)");
  CHECK_EQ(p.program.externs[0].reason,
           "matmul: ATen (BLAS); padded for 16-byte leading dims (misaligned operand views): copies of a");
  CHECK_EQ(print_dims(p.program.externs[0].tensor_views[0].strides), "[8,1]");
}

TEST(pad_matmuls_pads_n_when_only_the_rows_are_symbolic) {
  // The LM head of a dynamic batch or sequence: M = s0*s1 rows, K and N static. b is
  // padded as in the static case; the result keeps its symbolic rows, and the graph's
  // result is a copy of its slice.
  Padded p(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : bf16[s0*s1,16]{16,1}
  %3 = input(3) : bf16[13,16]{16,1}
  %4 = aten.permute.default(%3, [1, 0]) : bf16[16,13]{1,16}
  %5 = aten.mm.default(%2, %4) : bf16[s0*s1,13]{13,1}
  return (%5)
}
)");
  const std::string text = p.text();
  CHECK(text.find("padded for 16-byte leading dims (N 13->16): copies of b; result sliced by a copy") != std::string::npos);
  const ExternCall& e = p.program.externs[0];
  const Buffer& wide = p.program.buffers[e.output_buffers[0]];
  CHECK_EQ(print_dims(wide.sizes), "[s0*s1,16]");
  CHECK_EQ(print_dims(wide.strides), "[16,1]");
  CHECK_EQ(print_dims(e.tensor_views[1].sizes), "[16,16]");
}

TEST(pad_matmuls_leaves_a_symbolic_a_it_would_have_to_copy) {
  // K = 13 is a's leading dim: padding it would copy a, whose rows are symbolic.
  Padded p(R"(graph(s0=3) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : bf16[s0,13]{13,1}
  %2 = input(2) : bf16[13,16]{16,1}
  %3 = aten.mm.default(%1, %2) : bf16[s0,16]{16,1}
  return (%3)
}
)");
  CHECK(p.text().find("not padded: a's copy would have a symbolic row count") != std::string::npos);
}

TEST(pad_matmuls_pads_a_graph_input_once_and_weighs_per_call_copies) {
  // GPT-2 small's LM head at 8x512 (bf16, default options): wte^T is a graph input (the
  // tied embedding, a parameter), so no copy kernel pads it on every call: the extern
  // names it as a padded argument, which the runtime pads once and keeps while the input
  // is unchanged. Per call only the result's slice is copied.
  const char* lm_head = R"(graph {
  %0 = input(0) : bf16[4096,768]{768,1}
  %1 = input(1) : bf16[50257,768]{768,1}
  %2 = aten.permute.default(%1, [1, 0]) : bf16[768,50257]{1,768}
  %3 = aten.mm.default(%0, %2) : bf16[4096,50257]{50257,1}
  return (%3)
}
)";
  Padded p(lm_head, PadMatmulOptions{});
  const ExternCall& e = p.program.externs[0];
  CHECK_EQ(e.padded_args.size(), 1u);
  CHECK_EQ(e.padded_args[0].arg, 1);
  CHECK_EQ(print_dims(e.padded_args[0].sizes), "[768,50264]");
  CHECK_EQ(print_dims(e.padded_args[0].strides), "[1,768]");  // stays column-major
  CHECK_EQ(e.tensor_views[1].buffer, 1);                      // the input's view, as passed
  CHECK_EQ(e.reason,
           "matmul: ATen (BLAS); padded for 16-byte leading dims (N 50257->50264): copies of b (a graph input: "
           "padded once); result sliced by a copy; per-call copies ~412 us, the aligned kernel saves ~2503 us");
  CHECK_EQ(p.program.computed.size(), 1u);  // the result's slice only
  // The program text names the padded argument and reads back the same.
  const std::string text = p.text();
  CHECK(text.find(" padded bf16[768,50264]{1,768}) -> ") != std::string::npos);
  CHECK_EQ(print_program(parse_program(text)), text);

  // Without padding inputs once, the same GEMM copies wte^T on every call (a kernel).
  PadMatmulOptions per_call;
  per_call.pad_inputs_once = false;
  Padded q(lm_head, per_call);
  CHECK(q.program.externs[0].padded_args.empty());
  CHECK_EQ(q.program.computed.size(), 2u);
  CHECK(q.program.externs[0].reason.find("copies of b; result sliced by a copy; per-call copies ~489 us") !=
        std::string::npos);
}

TEST(pad_matmuls_leaves_a_gemm_whose_per_call_copies_cost_more_than_they_save) {
  // An intermediate b (not a graph input: copied on every call) with K = 8191 rows and
  // N odd: 2^27.6 multiply-adds at 64 per element moved pass the thresholds, but the copy
  // of b and of the result's slice (~7 us) cost more than the aligned kernel saves (~3 us).
  Padded p(R"(graph {
  %0 = input(0) : bf16[64,8191]{8191,1}
  %1 = input(1) : bf16[8191,401]{401,1}
  %2 = aten.relu.default(%1) : bf16[8191,401]{401,1}
  %3 = aten.mm.default(%0, %2) : bf16[64,401]{401,1}
  return (%3)
}
)", PadMatmulOptions{});
  const ExternCall& e = p.program.externs[0];
  CHECK(e.padded_args.empty());
  CHECK(e.reason.find("not padded (K 8191->8192, N 401->408): its copies cost ~") != std::string::npos);
}

TEST(pad_matmuls_returns_an_output_slice_as_a_view_of_the_padded_result) {
  // GPT-2's logits: the LM head's [B*T, N] result viewed as [B, T, N] and returned to a
  // caller that takes any strides. The output becomes a view of the padded result with its
  // strides ({64,16,1}, as Inductor returns it); the slice's copy has no reader left and is
  // dead: the only kernel pads wte^T.
  const char* head = R"(graph {
  %0 = input(0) : bf16[2,4,16]{64,16,1}
  %1 = input(1) : bf16[13,16]{16,1}
  %2 = aten.view.default(%0, [8, 16]) : bf16[8,16]{16,1}
  %3 = aten.permute.default(%1, [1, 0]) : bf16[16,13]{1,16}
  %4 = aten.mm.default(%2, %3) : bf16[8,13]{13,1}
  %5 = aten.view.default(%4, [2, 4, 13]) : bf16[2,4,13]{52,13,1}
  return (%5) any_strides(0)
}
)";
  Padded p(head);
  CHECK_EQ(p.text(),
           "program(vars=4)\n"
           "buf0 = input(0) : bf16[2,4,16]{64,16,1}\n"
           "buf1 = input(1) : bf16[13,16]{16,1}\n"
           "buf3 : bf16[16,16]{1,16} for [v0, v1] order [1, 0] = where(lt(v1, 13), buf1[(v0 + (v1 * 16))], 0.0:bf16)\n"
           "extern %4 aten.mm.default(%2 = buf0:bf16[8,16]{16,1}+0, %3 = buf3) -> buf4 : bf16[8,16]{16,1}  \"matmul: ATen (BLAS); padded for 16-byte leading dims (N 13->16): copies of b; result returned as a strided view\"\n"
           "dead buf2 : bf16[8,13]{13,1} for [v2, v3] = buf4[((v2 * 16) + v3)]\n"
           "return buf4:bf16[2,4,13]{64,16,1}+0\n");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_poi_copy_0 outer=[16]\n"
           "  stage 0 inner=[16]: buf3\n"
           "    buf3[(i0 + (o0 * 16))] = where(lt(o0, 13), buf1[(i0 + (o0 * 16))], 0.0:bf16)\n"
           "extern %4 aten.mm.default  # matmul: ATen (BLAS); padded for 16-byte leading dims (N 13->16): copies of b; result returned as a strided view\n");

  // The same graph whose caller needs the declared strides (no any_strides): the copy.
  std::string declared = head;
  declared.replace(declared.find(" any_strides(0)"), std::string(" any_strides(0)").size(), "");
  Padded q(declared);
  CHECK(q.program.externs[0].reason.find("; result sliced by a copy") != std::string::npos);
  CHECK_EQ(print_dims(q.program.outputs[0].view.strides), "[52,13,1]");
  CHECK(q.program.buffers[q.program.outputs[0].view.buffer].kind == Buffer::Kind::Computed);
}

TEST(pad_matmuls_keeps_the_slice_copy_for_readers_and_for_outputs_it_cannot_view) {
  // The logits returned and read (a softmax's exp): the output is a view, the reader reads
  // the slice's copy (fused into its kernel).
  Padded read(R"(graph {
  %0 = input(0) : bf16[8,16]{16,1}
  %1 = input(1) : bf16[13,16]{16,1}
  %2 = aten.permute.default(%1, [1, 0]) : bf16[16,13]{1,16}
  %3 = aten.mm.default(%0, %2) : bf16[8,13]{13,1}
  %4 = aten.exp.default(%3) : bf16[8,13]{13,1}
  return (%3, %4) any_strides(0, 1)
}
)");
  CHECK(read.program.externs[0].reason.find("; result returned as a strided view, sliced by a copy for its readers") !=
        std::string::npos);
  const int wide = read.program.externs[0].output_buffers[0];
  CHECK_EQ(read.program.outputs[0].view.buffer, wide);
  CHECK_EQ(print_dims(read.program.outputs[0].view.strides), "[16,1]");
  CHECK(read.program.buffers[read.program.outputs[1].view.buffer].kind == Buffer::Kind::Computed);

  // Two outputs view the result, one of them where the caller needs its declared strides
  // (a forward's saved activation): both keep the copy, so that they still alias.
  Padded saved(R"(graph {
  %0 = input(0) : bf16[8,16]{16,1}
  %1 = input(1) : bf16[13,16]{16,1}
  %2 = aten.permute.default(%1, [1, 0]) : bf16[16,13]{1,16}
  %3 = aten.mm.default(%0, %2) : bf16[8,13]{13,1}
  %4 = aten.view.default(%3, [2, 4, 13]) : bf16[2,4,13]{52,13,1}
  return (%4, %3) any_strides(0)
}
)");
  CHECK(saved.program.externs[0].reason.find("; result sliced by a copy") != std::string::npos);
  CHECK_EQ(saved.program.outputs[0].view.buffer, saved.program.outputs[1].view.buffer);
  CHECK_EQ(print_dims(saved.program.outputs[0].view.strides), "[52,13,1]");

  // A transposed output is no reshape of the slice: it stays a view of the copy.
  Padded transposed(R"(graph {
  %0 = input(0) : bf16[8,16]{16,1}
  %1 = input(1) : bf16[13,16]{16,1}
  %2 = aten.permute.default(%1, [1, 0]) : bf16[16,13]{1,16}
  %3 = aten.mm.default(%0, %2) : bf16[8,13]{13,1}
  %4 = aten.permute.default(%3, [1, 0]) : bf16[13,8]{1,13}
  return (%4) any_strides(0)
}
)");
  CHECK(transposed.program.externs[0].reason.find("; result sliced by a copy") != std::string::npos);
}

TEST(pad_matmuls_returns_a_view_of_a_result_with_symbolic_rows) {
  // A dynamic batch: [s0*4, N] viewed as [s0, 4, N]. The view's strides are the padded
  // result's, whatever s0.
  Padded p(R"(graph(s0=3) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : bf16[s0,4,16]{64,16,1}
  %2 = input(2) : bf16[13,16]{16,1}
  %3 = aten.view.default(%1, [s0*4, 16]) : bf16[s0*4,16]{16,1}
  %4 = aten.permute.default(%2, [1, 0]) : bf16[16,13]{1,16}
  %5 = aten.mm.default(%3, %4) : bf16[s0*4,13]{13,1}
  %6 = aten.view.default(%5, [s0, 4, 13]) : bf16[s0,4,13]{52,13,1}
  return (%6) any_strides(0)
}
)");
  CHECK(p.text().find("result returned as a strided view") != std::string::npos);
  const ProgramOutput& out = p.program.outputs[0];
  CHECK_EQ(out.view.buffer, p.program.externs[0].output_buffers[0]);
  CHECK_EQ(print_dims(out.view.sizes) + print_dims(out.view.strides), "[s0,4,13][64,16,1]");
  // One kernel, b's copy: the slice's copy is dead.
  const std::string schedule = p.schedule_text();
  CHECK(schedule.rfind("kernel ember_poi_copy_0 ", 0) == 0);
  CHECK_EQ(schedule.find("kernel ", 1), std::string::npos);
}
