// lower_graph: graph text in, program text out (lower/program_text.h).
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;

TEST(lower_pointwise_chain_is_one_buffer) {
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[8,4]{4,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f32[8,4]{4,1}
  %2 = aten.exp.default(%1) : f32[8,4]{4,1}
  %3 = aten.add.Tensor(%2, %0, 1) : f32[8,4]{4,1}
  return (%3)
}
)", {"lower_graph"}),
           "program(vars=2)\n"
           "buf0 = input(0) : f32[8,4]{4,1}\n"
           "buf1 : f32[8,4]{4,1} for [v0, v1] = (exp((buf0[((v0 * 4) + v1)] * 2.0)) + buf0[((v0 * 4) + v1)])  from %3 %2 %1\n"
           "return buf1\n");
}

TEST(lower_unsupported_op_becomes_extern_with_reason) {
  // relu is realized for the extern; neg reads the extern's result.
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[4,4]{4,1}
  %1 = aten.relu.default(%0) : f32[4,4]{4,1}
  %2 = aten.mm.default(%1, %1) : f32[4,4]{4,1}
  %3 = aten.neg.default(%2) : f32[4,4]{4,1}
  return (%3)
}
)", {"lower_graph"}),
           "program(vars=4)\n"
           "buf0 = input(0) : f32[4,4]{4,1}\n"
           "buf1 : f32[4,4]{4,1} for [v0, v1] = max(buf0[((v0 * 4) + v1)], 0.0)  from %1\n"
           "extern %2 aten.mm.default(%1 = buf1, %1 = buf1) -> buf2 : f32[4,4]{4,1}  \"matmul: ATen (BLAS)\"\n"
           "buf3 : f32[4,4]{4,1} for [v2, v3] = neg(buf2[((v2 * 4) + v3)])  from %3\n"
           "return buf3\n");
}

TEST(lower_max_pool_backward_window_tests_fold) {
  // Non-overlapping 2x2 windows: each input element has one candidate window, at
  // (h >> 1, w >> 1); the window and range tests and the index clamps fold away.
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[1,2,2,2]{8,4,2,1}
  %1 = input(1) : f32[1,2,4,4]{32,16,4,1}
  %2 = input(2) : i64[1,2,2,2]{8,4,2,1}
  %3 = aten.max_pool2d_with_indices_backward.default(%0, %1, [2, 2], [], [0, 0], [1, 1], false, %2) : f32[1,2,4,4]{32,16,4,1}
  return (%3)
}
)", {"lower_graph"}),
           "program(vars=3)\n"
           "buf0 = input(0) : f32[1,2,2,2]{8,4,2,1}\n"
           "buf1 = input(1) : f32[1,2,4,4]{32,16,4,1}\n"
           "buf2 = input(2) : i64[1,2,2,2]{8,4,2,1}\n"
           "buf3 : f32[1,2,4,4]{32,16,4,1} for [_, v0, v1, v2] = (0.0 + where(eq(buf2[(((v0 * 4) + (shr(v1, 1) * 2)) + "
           "shr(v2, 1))], ((v1 * 4) + v2)), buf0[(((v0 * 4) + (shr(v1, 1) * 2)) + shr(v2, 1))], 0.0))  from %3\n"
           "return buf3\n");
}

TEST(lower_views_of_inputs_stay_strided) {
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.permute.default(%0, [1, 0]) : f32[6,4]{1,6}
  %2 = aten.slice.Tensor(%1, 0, 1, 5, 2) : f32[2,4]{2,6}
  %3 = aten.neg.default(%2) : f32[2,4]{4,1}
  return (%3)
}
)", {"lower_graph"}),
           "program(vars=2)\n"
           "buf0 = input(0) : f32[4,6]{6,1}\n"
           "buf1 : f32[2,4]{4,1} for [v0, v1] = neg(buf0[(((v0 * 2) + (v1 * 6)) + 1)])  from %3\n"
           "return buf1\n");
}

TEST(lower_max_pool_of_a_transposed_read_realizes_its_input) {
  // ReLU of a channels-last value pooled in NCHW: realized once, contiguously (one
  // transposing pass), instead of four strided reads per window inside the pool.
  const std::string program = after(R"(graph {
  %0 = input(0) : f32[2,4,8,8]{256,1,32,4}
  %1 = aten.relu.default(%0) : f32[2,4,8,8]{256,64,8,1}
  %2 = aten.max_pool2d_with_indices.default(%1, [2, 2], [], [0, 0], [1, 1], false) : (f32[2,4,4,4]{64,16,4,1}, i64[2,4,4,4]{64,16,4,1})
  return (%2, %2.1)
}
)", {"lower_graph"});
  CHECK(program.find("buf1 : f32[2,4,8,8]{256,64,8,1} for [v0, v1, v2, v3] = max(buf0[") != std::string::npos);
  CHECK(program.find("buf2 : f32[2,4,4,4]{64,16,4,1} for [v4, v5, v6, v7] = max(max(max(buf1[") != std::string::npos);
}

TEST(lower_a_1x1_weight_is_passed_to_the_convolution_as_it_is) {
  // The convolution takes channels-last operands (extern_layouts.h). A [8, 4, 1, 1]
  // weight differs from channels-last only in the strides of its size-1 dims: no copy.
  // A 3x3 one is transposed by a kernel.
  const char* conv = R"(graph {
  %0 = input(0) : f32[2,4,8,8]{256,1,32,4}
  %1 = input(1) : f32[8,4,K,K]{S,SS,K,1}
  %2 = aten.convolution.default(%0, %1, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1) : f32[2,8,O,O]{OO,1,O8,8}
  return (%2)
}
)";
  auto with = [&](int k) {
    std::string text = conv;
    auto put = [&](const std::string& key, int64_t v) {
      for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), std::to_string(v));
    };
    const int o = 9 - k;
    put("OO", o * o * 8);
    put("O8", o * 8);
    put("O", o);
    put("SS", k * k);
    put("S", 4 * k * k);
    put("K", k);
    return text;
  };
  ember::PipelineOptions copied;  // the weight is not left for the runner to prepare
  copied.prepared_weights = false;
  CHECK(after(with(1), {"lower_graph"}, copied).find(" for ") == std::string::npos);
  CHECK(after(with(3), {"lower_graph"}, copied).find("buf2 : f32[8,4,3,3]{36,1,12,4} for ") != std::string::npos);
}

TEST(lower_a_parameter_weight_is_left_for_the_runtime_to_prepare) {
  // PipelineOptions::prepared_weights (on for the CPU): a 3x3 weight that is a graph input
  // reaches the convolution in eager's layout, marked `prepared` for the runtime to prepare
  // once (ExternCall::prepared_args); the activation still gets its channels-last copy. A
  // weight the graph computes is no input: it is copied channels-last as before.
  const char* graph = R"(graph {
  %0 = input(0) : f32[2,4,8,8]{256,64,8,1}
  %1 = input(1) : f32[8,4,3,3]{36,9,3,1}
  %2 = aten.convolution.default(%0, %1, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1) : f32[2,8,6,6]{288,1,48,8}
  %3 = aten.neg.default(%1) : f32[8,4,3,3]{36,9,3,1}
  %4 = aten.convolution.default(%0, %3, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1) : f32[2,8,6,6]{288,1,48,8}
  return (%2, %4)
}
)";
  CHECK_EQ(after(graph, {"lower_graph"}),
           "program(vars=12)\n"
           "buf0 = input(0) : f32[2,4,8,8]{256,64,8,1}\n"
           "buf1 = input(1) : f32[8,4,3,3]{36,9,3,1}\n"
           "buf2 : f32[2,4,8,8]{256,1,32,4} for [v0, v1, v2, v3] order [0, 2, 1, 3] = "
           "buf0[((((v0 * 256) + (v1 * 64)) + (v2 * 8)) + v3)]\n"
           "extern %2 aten.convolution.default(%0 = buf2, %1 = buf1 prepared) -> buf3 : f32[2,8,6,6]{288,1,48,8}  "
           "\"convolution: ATen (oneDNN)\"\n"
           "buf4 : f32[2,4,8,8]{256,1,32,4} for [v4, v5, v6, v7] order [0, 2, 1, 3] = "
           "buf0[((((v4 * 256) + (v5 * 64)) + (v6 * 8)) + v7)]\n"
           "buf5 : f32[8,4,3,3]{36,1,12,4} for [v8, v9, v10, v11] order [0, 2, 3, 1] = "
           "neg(buf1[((((v8 * 36) + (v9 * 9)) + (v10 * 3)) + v11)])  from %3\n"
           "extern %4 aten.convolution.default(%0 = buf4, %3 = buf5) -> buf6 : f32[2,8,6,6]{288,1,48,8}  "
           "\"convolution: ATen (oneDNN)\"\n"
           "return buf3, buf6\n");
  // Off (and always for CUDA), the parameter is copied channels-last like any weight.
  ember::PipelineOptions copied;
  copied.prepared_weights = false;
  const std::string program = after(graph, {"lower_graph"}, copied);
  CHECK(program.find("prepared") == std::string::npos);
  CHECK(program.find("buf3 : f32[8,4,3,3]{36,1,12,4} for [v4, v5, v6, v7] order [0, 2, 3, 1] = buf1[") != std::string::npos);
  CHECK(after(graph, {"lower_graph"}, ember::PipelineOptions::cuda()).find("prepared") == std::string::npos);
}

TEST(lower_nhwc_values_between_convolutions_keep_their_layout) {
  // A convolution (channels-last) permuted to [N, H, W, C] and used by a LayerNorm-like
  // reduction and the value after it: buf5, read along its last dim, is stored with that
  // dim innermost ({128,32,8,1}), not with "channels-last" strides of its own dims
  // ({128,1,32,4}: its 8 channels 4 apart, and the reduction reading them so).
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[2,8,4,4]{128,1,32,8}
  %1 = input(1) : f32[8,8,1,1]{8,1,1,1}
  %2 = input(2) : f32[2,4,4,8]{128,32,8,1}
  %3 = aten.convolution.default(%0, %1, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1) : f32[2,8,4,4]{128,1,32,8}
  %4 = aten.permute.default(%3, [0, 2, 3, 1]) : f32[2,4,4,8]{128,32,8,1}
  %5 = aten.mul.Tensor(%4, %2) : f32[2,4,4,8]{128,32,8,1}
  %6 = aten.add.Tensor(%5, %2, 1) : f32[2,4,4,8]{128,32,8,1}
  %7 = aten.sum.dim_IntList(%6, [3], true) : f32[2,4,4,1]{16,4,1,1}
  %8 = aten.sub.Tensor(%6, %7, 1) : f32[2,4,4,8]{128,32,8,1}
  return (%8)
}
)", {"lower_graph"}, ember::PipelineOptions::cuda()),
           "program(vars=12)\n"
           "buf0 = input(0) : f32[2,8,4,4]{128,1,32,8}\n"
           "buf1 = input(1) : f32[8,8,1,1]{8,1,1,1}\n"
           "buf2 = input(2) : f32[2,4,4,8]{128,32,8,1}\n"
           "extern %3 aten.convolution.default(%0 = buf0, %1 = buf1) -> buf3 : f32[2,8,4,4]{128,1,32,8}  "
           "\"convolution: ATen (oneDNN)\"\n"
           "buf4 : f32[2,4,4,8]{128,32,8,1} for [v0, v1, v2, v3] = ((buf3[((((v0 * 128) + (v1 * 32)) + (v2 * 8)) + v3)] * "
           "buf2[((((v0 * 128) + (v1 * 32)) + (v2 * 8)) + v3)]) + buf2[((((v0 * 128) + (v1 * 32)) + (v2 * 8)) + v3)])  "
           "from %6 %5\n"
           "buf5 : f32[2,4,4,1]{16,4,1,1} for [v4, v5, v6, _] = sum f32 over [8] for [v7] of buf4[((((v4 * 128) + (v5 * 32)) + "
           "(v6 * 8)) + v7)]  from %7\n"
           "buf6 : f32[2,4,4,8]{128,32,8,1} for [v8, v9, v10, v11] = sub(buf4[((((v8 * 128) + (v9 * 32)) + (v10 * 8)) + v11)], "
           "buf5[(((v8 * 16) + (v9 * 4)) + v10)])  from %8\n"
           "return buf6\n");
}

namespace {

const char* kBiasedConvolution = R"(graph {
  %0 = input(0) : f32[2,8,4,4]{128,1,32,8}
  %1 = input(1) : f32[8,8,1,1]{8,1,1,1}
  %2 = input(2) : f32[8]{1}
  %3 = aten.convolution.default(%0, %1, %2, [1, 1], [0, 0], [1, 1], false, [0, 0], 1) : f32[2,8,4,4]{128,1,32,8}
  %4 = aten.relu.default(%3) : f32[2,8,4,4]{128,1,32,8}
  return (%4)
}
)";

}  // namespace

TEST(lower_cuda_convolution_bias_joins_the_kernel_reading_it) {
  // cuDNN would add the bias in an elementwise kernel of its own: ATen gets None for it
  // (`%2 = none`), and the relu adds it as it reads the convolution.
  CHECK_EQ(after(kBiasedConvolution, {"lower_graph"}, ember::PipelineOptions::cuda()),
           "program(vars=4)\n"
           "buf0 = input(0) : f32[2,8,4,4]{128,1,32,8}\n"
           "buf1 = input(1) : f32[8,8,1,1]{8,1,1,1}\n"
           "buf2 = input(2) : f32[8]{1}\n"
           "extern %3 aten.convolution.default(%0 = buf0, %1 = buf1, %2 = none) -> buf3 : f32[2,8,4,4]{128,1,32,8}  "
           "\"convolution: ATen (oneDNN)\"\n"
           "buf4 : f32[2,8,4,4]{128,1,32,8} for [v0, v1, v2, v3] order [0, 2, 3, 1] = max((buf3[((((v0 * 128) + v1) + "
           "(v2 * 32)) + (v3 * 8))] + buf2[v1]), 0.0)  from %4 %3\n"
           "return buf4\n");
}

TEST(lower_cpu_convolution_keeps_its_bias) {
  // oneDNN adds the bias inside the convolution.
  const std::string text = after(kBiasedConvolution, {"lower_graph"});
  // (The weight is a parameter: the CPU runner prepares it.)
  CHECK(text.find("(%0 = buf0, %1 = buf1 prepared, %2 = buf2) -> buf3") != std::string::npos);
}

TEST(lower_value_stored_in_the_layout_its_copies_ask_for) {
  // Eager leaves the residual sum transposed (the permuted operand comes first); every
  // reader copies it to contiguous first (clone(none) passes that request on). Stored
  // contiguously, the copies are plain reads and the sum reads along its unit stride.
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[2,8,4]{32,4,1}
  %1 = input(1) : f32[2,4,8]{32,8,1}
  %2 = aten.gelu.default(%0, "none") : f32[2,8,4]{32,4,1}
  %3 = aten.permute.default(%2, [0, 2, 1]) : f32[2,4,8]{32,1,4}
  %4 = aten.add.Tensor(%3, %1, 1) : f32[2,4,8]{32,1,4}
  %5 = aten.clone.default(%4, none) : f32[2,4,8]{32,1,4}
  %6 = aten.clone.default(%5, "contiguous_format") : f32[2,4,8]{32,8,1}
  %7 = aten.sum.dim_IntList(%6, [2], true) : f32[2,4,1]{4,1,1}
  %8 = aten.add.Tensor(%5, %7, 1) : f32[2,4,8]{32,1,4}
  %9 = aten.clone.default(%8, "contiguous_format") : f32[2,4,8]{32,8,1}
  return (%9)
}
)", {"lower_graph"}),
           "program(vars=9)\n"
           "buf0 = input(0) : f32[2,8,4]{32,4,1}\n"
           "buf1 = input(1) : f32[2,4,8]{32,8,1}\n"
           "buf2 : f32[2,4,8]{32,8,1} for [v0, v1, v2] = (((buf0[(((v0 * 32) + (v2 * 4)) + v1)] * 0.5) * (1.0 + "
           "erf((buf0[(((v0 * 32) + (v2 * 4)) + v1)] * 0.70710676908493042)))) + buf1[(((v0 * 32) + (v1 * 8)) + v2)])  "
           "from %5 %4 %2 %3\n"
           "buf3 : f32[2,4,1]{4,1,1} for [v3, v4, _] = sum f32 over [8] for [v5] of buf2[(((v3 * 32) + (v4 * 8)) + v5)]  "
           "from %6 %7\n"
           "buf4 : f32[2,4,8]{32,8,1} for [v6, v7, v8] = (buf2[(((v6 * 32) + (v7 * 8)) + v8)] + buf3[((v6 * 4) + v7)])  "
           "from %9 %8\n"
           "return buf4\n");
}

TEST(lower_copies_that_disagree_keep_eager_layout) {
  // One reader asks for contiguous, another for channels-last: neither wins.
  const std::string program = after(R"(graph {
  %0 = input(0) : f32[2,3,4,5]{60,1,15,3}
  %1 = aten.gelu.default(%0, "none") : f32[2,3,4,5]{60,1,15,3}
  %2 = aten.clone.default(%1, "contiguous_format") : f32[2,3,4,5]{60,20,5,1}
  %3 = aten.clone.default(%1, "channels_last") : f32[2,3,4,5]{60,1,15,3}
  %4 = aten.sum.dim_IntList(%2, [3], false) : f32[2,3,4]{12,4,1}
  %5 = aten.sum.dim_IntList(%3, [1], false) : f32[2,4,5]{20,5,1}
  return (%4, %5)
}
)", {"lower_graph"});
  CHECK(program.find("{60,20,5,1}") == std::string::npos);
}

TEST(lower_a_value_cut_into_slices_stays_lazy_in_their_cat) {
  // Swin's patch merging, shift_block: an expensive value read through strided slices
  // that between them read each element once (count_reads) is not stored: the cat
  // computes each part from the value's own expression.
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[2,8,6]{48,6,1}
  %1 = aten.sin.default(%0) : f32[2,8,6]{48,6,1}
  %2 = aten.slice.Tensor(%1, 1, 0, 9223372036854775807, 2) : f32[2,4,6]{48,12,1}
  %3 = aten.slice.Tensor(%1, 1, 1, 9223372036854775807, 2) : f32[2,4,6]{48,12,1}
  %4 = aten.cat.default([%2, %3], 2) : f32[2,4,12]{48,12,1}
  return (%4)
}
)", {"lower_graph"}),
           "program(vars=3)\n"
           "buf0 = input(0) : f32[2,8,6]{48,6,1}\n"
           "buf1 : f32[2,4,12]{48,12,1} for [v0, v1, v2] = where(lt(v2, 6), sin(buf0[(((v0 * 48) + ((v1 * 2) * 6)) + v2)]), "
           "sin(buf0[(((v0 * 48) + (((v1 * 2) + 1) * 6)) + (v2 + -6))]))  from %4 %1 %2 %1 %3\n"
           "return buf1\n");
}

TEST(lower_a_value_read_through_overlapping_slices_is_stored) {
  // The same value read whole and through a half: 1.5 reads an element, so it is stored
  // once rather than computed again.
  CHECK_EQ(after(R"(graph {
  %0 = input(0) : f32[2,8,6]{48,6,1}
  %1 = aten.sin.default(%0) : f32[2,8,6]{48,6,1}
  %2 = aten.slice.Tensor(%1, 1, 0, 9223372036854775807, 2) : f32[2,4,6]{48,12,1}
  %3 = aten.slice.Tensor(%1, 1, 0, 9223372036854775807, 1) : f32[2,8,6]{48,6,1}
  %4 = aten.cat.default([%2, %3], 1) : f32[2,12,6]{72,6,1}
  return (%4)
}
)", {"lower_graph"}),
           "program(vars=6)\n"
           "buf0 = input(0) : f32[2,8,6]{48,6,1}\n"
           "buf1 : f32[2,8,6]{48,6,1} for [v0, v1, v2] = sin(buf0[(((v0 * 48) + (v1 * 6)) + v2)])  from %1\n"
           "buf2 : f32[2,12,6]{72,6,1} for [v3, v4, v5] = where(lt(v4, 4), buf1[(((v3 * 48) + (v4 * 12)) + v5)], "
           "buf1[(((v3 * 48) + ((v4 + -4) * 6)) + v5)])  from %4\n"
           "return buf2\n");
}
