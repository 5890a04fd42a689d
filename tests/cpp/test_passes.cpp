// Lowering, dead-code elimination and fusion, as before/expected text.
#include "check.h"
#include "pipeline_util.h"
#include "schedule/merge_outer_dims.h"

using namespace ember;
using ember_test::Pipeline;

namespace {

const char* kLayerNorm = R"(graph {
  %0 = input(0) : f32[4,16]{16,1}
  %1 = input(1) : f32[16]{1}
  %2 = aten.var_mean.correction(%0, [1], 0, true) : (f32[4,1]{1,1}, f32[4,1]{1,1})
  %3 = aten.add.Tensor(%2, 1e-05, 1) : f32[4,1]{1,1}
  %4 = aten.rsqrt.default(%3) : f32[4,1]{1,1}
  %5 = aten.sub.Tensor(%0, %2.1, 1) : f32[4,16]{16,1}
  %6 = aten.mul.Tensor(%5, %4) : f32[4,16]{16,1}
  %7 = aten.mul.Tensor(%6, %1) : f32[4,16]{16,1}
  return (%7)
}
)";

}  // namespace

TEST(pointwise_chain_is_one_buffer) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,4]{4,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f32[8,4]{4,1}
  %2 = aten.exp.default(%1) : f32[8,4]{4,1}
  %3 = aten.add.Tensor(%2, %0, 1) : f32[8,4]{4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program_text(),
           "buf0 = input(0) : f32[8,4]\n"
           "buf1 : f32[8,4] = (exp((buf0[((v0 * 4) + v1)] * 2)) + buf0[((v0 * 4) + v1)])\n"
           "return buf1\n");
  CHECK_EQ(p.schedule.kernels.size(), 1u);
}

TEST(unsupported_op_becomes_extern_with_reason) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,4]{4,1}
  %1 = aten.relu.default(%0) : f32[4,4]{4,1}
  %2 = aten.mm.default(%1, %1) : f32[4,4]{4,1}
  %3 = aten.neg.default(%2) : f32[4,4]{4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program.externs.size(), 1u);
  CHECK_EQ(p.program.externs[0].reason, "matmul: ATen (BLAS)");
  // relu is realized for the extern, then neg runs in a second kernel after it.
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[4]: buf1\n"
           "extern aten.mm.default  # matmul: ATen (BLAS)\n"
           "kernel ember_k1 outer=[4]\n"
           "  stage 0 inner=[4]: buf3\n");
}

TEST(layer_norm_fuses_into_one_kernel_with_three_stages) {
  Pipeline p(kLayerNorm);
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[16]: buf2(sum)\n"
           "  stage 1 inner=[16]: buf3(sum) buf4(sum)\n"
           "  stage 2 inner=[16]: buf5\n");
  // mean, variance and the mean's correction (the deviations' sum, beside their
  // squares') stay in registers: only the input, weight and output are arguments.
  CHECK_EQ(p.c_code.kernels[0].args.size(), 3u);
  CHECK(!p.c_code.buffer_in_memory[2]);
  CHECK(!p.c_code.buffer_in_memory[3]);
  CHECK(!p.c_code.buffer_in_memory[4]);
}

TEST(fusion_disabled_gives_one_kernel_per_buffer) {
  Pipeline p(kLayerNorm, ember_test::unfused());
  CHECK_EQ(p.schedule.kernels.size(), 4u);
  CHECK(p.c_code.buffer_in_memory[2]);
}

TEST(softmax_is_one_kernel) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[6,10]{10,1}
  %1 = aten._softmax.default(%0, -1, false) : f32[6,10]{10,1}
  return (%1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[6]\n"
           "  stage 0 inner=[10]: buf1(max)\n"
           "  stage 1 inner=[10]: buf2(sum)\n"
           "  stage 2 inner=[10]: buf3\n");
}

TEST(transposed_read_is_not_fused) {
  // b reads a at a transposed index: other threads' rows, so a separate kernel.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,8]{8,1}
  %1 = aten.exp.default(%0) : f32[8,8]{8,1}
  %2 = aten.permute.default(%1, [1, 0]) : f32[8,8]{1,8}
  %3 = aten.add.Tensor(%1, %2, 1) : f32[8,8]{8,1}
  return (%3, %1)
}
)");
  CHECK_EQ(p.schedule.kernels.size(), 2u);
}

TEST(unused_pool_indices_are_dead) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[1,2,4,4]{32,16,4,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [2, 2], [2, 2], [0, 0], [1, 1], false) : (f32[1,2,2,2]{8,4,2,1}, i64[1,2,2,2]{8,4,2,1})
  return (%1)
}
)");
  // A 2x2 window is unrolled into one pointwise kernel vectorized along the output
  // width; the unrolled indices, unused, are never computed.
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2,2]\n"
           "  stage 0 inner=[2]: buf1\n");
}

TEST(max_pool_backward_window_tests_fold) {
  // Non-overlapping 2x2 windows: each input element has one candidate window, at
  // (h >> 1, w >> 1); the window and range tests and the index clamps fold away.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[1,2,2,2]{8,4,2,1}
  %1 = input(1) : f32[1,2,4,4]{32,16,4,1}
  %2 = input(2) : i64[1,2,2,2]{8,4,2,1}
  %3 = aten.max_pool2d_with_indices_backward.default(%0, %1, [2, 2], [], [0, 0], [1, 1], false, %2) : f32[1,2,4,4]{32,16,4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program_text(),
           "buf0 = input(0) : f32[1,2,2,2]\n"
           "buf1 = input(1) : f32[1,2,4,4]\n"
           "buf2 = input(2) : i64[1,2,2,2]\n"
           "buf3 : f32[1,2,4,4] = (0 + where(eq(buf2[(((v0 * 4) + (shr(v1, 1) * 2)) + shr(v2, 1))], ((v1 * 4) + v2)), "
           "buf0[(((v0 * 4) + (shr(v1, 1) * 2)) + shr(v2, 1))], 0))\n"
           "return buf3\n");
}

TEST(max_pool_of_a_transposed_read_realizes_its_input) {
  // ReLU of a channels-last value pooled in NCHW: realized once, contiguously (one
  // transposing pass), instead of four strided reads per window inside the pool.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,4,8,8]{256,1,32,4}
  %1 = aten.relu.default(%0) : f32[2,4,8,8]{256,64,8,1}
  %2 = aten.max_pool2d_with_indices.default(%1, [2, 2], [], [0, 0], [1, 1], false) : (f32[2,4,4,4]{64,16,4,1}, i64[2,4,4,4]{64,16,4,1})
  return (%2, %2.1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2,4,8]\n"
           "  stage 0 inner=[8]: buf1\n"
           "kernel ember_k1 outer=[2,4,4]\n"
           "  stage 0 inner=[4]: buf2 buf3\n");
}

TEST(a_1x1_weight_is_passed_to_the_convolution_as_it_is) {
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
  Pipeline one(with(1).c_str());
  CHECK(one.schedule_text().find("kernel") == std::string::npos);
  Pipeline three(with(3).c_str());
  CHECK(three.schedule_text().find("kernel ember_k0") != std::string::npos);
}

TEST(views_of_inputs_stay_strided) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.permute.default(%0, [1, 0]) : f32[6,4]{1,6}
  %2 = aten.slice.Tensor(%1, 0, 1, 5, 2) : f32[2,4]{2,6}
  %3 = aten.neg.default(%2) : f32[2,4]{4,1}
  return (%3)
}
)");
  CHECK_EQ(p.program_text(),
           "buf0 = input(0) : f32[4,6]\n"
           "buf1 : f32[2,4] = neg(buf0[(((v0 * 2) + (v1 * 6)) + 1)])\n"
           "return buf1\n");
}

TEST(generated_code_golden_layer_norm) {
  Pipeline p(kLayerNorm);
  CHECK(ember_test::matches_golden("layer_norm.c", p.c_code.source));
}

TEST(generated_code_golden_max_pool) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[1,2,5,5]{50,25,5,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [3, 3], [2, 2], [1, 1], [1, 1], false) : (f32[1,2,3,3]{18,9,3,1}, i64[1,2,3,3]{18,9,3,1})
  return (%1, %1.1)
}
)");
  CHECK(ember_test::matches_golden("max_pool.c", p.c_code.source));
}

TEST(contiguous_inner_dims_merge) {
  // Global average pooling: the [H, W] reduction becomes one 64-long loop.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,3,8,8]{192,64,8,1}
  %1 = aten.mean.dim(%0, [-1, -2], true) : f32[2,3,1,1]{3,1,1,1}
  return (%1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2,3]\n"
           "  stage 0 inner=[64]: buf1(sum)\n"
           "  stage 1 inner=[]: buf2\n");
}

TEST(symbolic_outer_dims_merge_when_indices_walk_them_as_one) {
  // GELU over [s0, s1, 3072]: its outer dims [s0, s1] are one dim of s0*s1 rows for
  // every index (coefficients 3072*s1 and 3072), symbolically.
  Pipeline p(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s0,s1,3072]{3072*s1,3072,1}
  %3 = aten.tanh.default(%2) : f32[s0,s1,3072]{3072*s1,3072,1}
  %4 = aten.reciprocal.default(%3) : f32[s0,s1,3072]{3072*s1,3072,1}
  return (%4)
}
)");
  ember::Schedule s = p.schedule;
  CHECK_EQ(print_dims(s.kernels[0].outer), "[s0,s1]");
  ember::merge_symbolic_outer_dims(s);
  CHECK_EQ(print_dims(s.kernels[0].outer), "[s0*s1]");
  CHECK_EQ(print_dims(s.kernels[0].stages[0].inner), "[3072]");
}

TEST(symbolic_outer_dims_of_a_transposed_read_stay_apart) {
  // The input is read transposed ([s1, s0] in memory): its index has o0 * 3072 and
  // o1 * 3072*s0, not a single walk, so the dims stay (the per-row division remains).
  Pipeline p(R"(graph(s0=3, s1=4) {
  %0 = sym_input(0, s0) : none
  %1 = sym_input(1, s1) : none
  %2 = input(2) : f32[s1,s0,3072]{3072*s0,3072,1}
  %3 = aten.permute.default(%2, [1, 0, 2]) : f32[s0,s1,3072]{3072,3072*s0,1}
  %4 = aten.tanh.default(%3) : f32[s0,s1,3072]{3072*s1,3072,1}
  return (%4)
}
)");
  ember::Schedule s = p.schedule;
  const size_t before = s.kernels[0].outer.size();
  CHECK(before >= 2);
  ember::merge_symbolic_outer_dims(s);
  CHECK_EQ(s.kernels[0].outer.size(), before);
}

TEST(padded_dims_do_not_merge) {
  // The bounds test uses the loop vars outside a memory index: no merge.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.constant_pad_nd.default(%0, [1, 1, 1, 1], 0.0) : f32[6,8]{8,1}
  %2 = aten.sum.dim_IntList(%1, [0, 1], true, none) : f32[1,1]{1,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule.kernels[0].stages[0].inner.size(), 2u);
}

TEST(channels_last_spatial_mean_is_a_vector_reduction) {
  // NHWC input: C is contiguous, so C is the vectorized loop and H*W loops outside.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,32,8,8]{2048,1,256,32}
  %1 = aten.relu.default(%0) : f32[2,32,8,8]{2048,1,256,32}
  %2 = aten.mean.dim(%1, [-1, -2], true) : f32[2,32,1,1]{32,1,1,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[2]\n"
           "  stage 0 vector inner=[32,64]: buf1(sum)\n"
           "  stage 1 inner=[32]: buf2\n");
}

TEST(column_sum_is_a_vector_reduction) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[100,64]{64,1}
  %1 = aten.sum.dim_IntList(%0, [0], false, none) : f32[64]{1}
  return (%1)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector inner=[64,100]: buf1(sum)\n");
}

TEST(cumsum_is_a_scan_fused_with_its_consumer) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,10]{10,1}
  %1 = aten.cumsum.default(%0, 1, none) : f32[4,10]{10,1}
  %2 = aten.mul.Tensor(%1, 2.0) : f32[4,10]{10,1}
  return (%2)
}
)");
  CHECK_EQ(p.schedule_text(),
           "kernel ember_k0 outer=[4]\n"
           "  stage 0 inner=[10]: buf1(scan sum) buf2\n");
  // The running sum feeds the multiply directly and never touches memory.
  CHECK(!p.c_code.buffer_in_memory[1]);
}

// BatchNorm statistics over a channels-last activation: one row, two long vector
// reductions. split_reductions runs them in 64 chunks of whole 256-step blocks.
constexpr const char* kBatchNormStats = R"(graph {
  %0 = input(0) : f32[32,32,64,64]{131072,1,2048,32}
  %1 = aten.var_mean.correction(%0, [0, 2, 3], 0, true) : (f32[1,32,1,1]{32,1,1,1}, f32[1,32,1,1]{32,1,1,1})
  return (%1, %1.1)
}
)";

TEST(split_reductions_marks_long_reductions_of_few_row_kernels) {
  Pipeline bn(kBatchNormStats);
  CHECK_EQ(bn.schedule_text(),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector split=64 inner=[32,131072]: buf1(sum)\n"
           "  stage 1 vector split=64 inner=[32,131072]: buf2(sum) buf3(sum)\n"
           "  stage 2 inner=[32]: buf4 buf5\n");
  // Many rows: rows are the parallelism; short reductions stay whole.
  Pipeline rows(R"(graph {
  %0 = input(0) : f32[512,4096]{4096,1}
  %1 = aten.sum.dim_IntList(%0, [1], false) : f32[512]{1}
  %2 = input(1) : f32[64,64]{64,1}
  %3 = aten.amax.default(%2, [0, 1], false) : f32[]{}
  return (%1, %3)
}
)");
  CHECK(rows.schedule_text().find("split") == std::string::npos);
  // A scan is sequential.
  Pipeline scan(R"(graph {
  %0 = input(0) : f32[1048576]{1}
  %1 = aten.cumsum.default(%0, 0) : f32[1048576]{1}
  return (%1)
}
)");
  CHECK(scan.schedule_text().find("split") == std::string::npos);
}

TEST(split_stages_run_chunks_on_threads_and_combine_in_order) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[1000000]{1}
  %1 = aten.sum.default(%0) : f32[]{}
  %2 = aten.argmax.default(%0) : i64[]{}
  return (%1, %2)
}
)");
  CHECK(p.schedule_text().find("split=61 inner=[1000000]") != std::string::npos);
  const std::string& c = p.c_code.source;
  // Up to 61 chunks (16k iterations each at least): 245 blocks of 4096 make 49 chunks of
  // 5 blocks, the last one shorter.
  CHECK(c.find("#pragma omp parallel for schedule(static) if (!omp_in_parallel())\n"
               "    for (int64_t ch = 0; ch < 49LL; ++ch) {\n"
               "      const int64_t ch_lo = ch * 20480LL, ch_hi = ch_lo + 20480LL < 1000000LL ? ch_lo + 20480LL : 1000000LL;") !=
        std::string::npos);
  CHECK(c.find("for (int64_t i0b = ch_lo; i0b < ch_hi; i0b += 4096LL) {") != std::string::npos);
  // Partials combine from chunk 0 on, in order; a later arg partial wins only if strictly better.
  CHECK(c.find("for (int64_t ch = 1; ch < 49LL; ++ch) {") != std::string::npos);
  CHECK(c.find("if ((acc1_ch[ch] > comb5) || (acc1_ch[ch] != acc1_ch[ch] && comb5 == comb5)) { comb5 = acc1_ch[ch]; comb6 = arg2_ch[ch]; }") != std::string::npos);
  CHECK(c.find("rows <= grain || rows < omp_get_max_threads()") != std::string::npos);
}

// Two layers of the same shape: their tanh kernels differ only in their buffers and share
// one function; the second kernel's text is a comment naming the first.
TEST(kernels_that_differ_only_in_buffers_share_a_function) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = input(1) : f32[8,8]{8,1}
  %2 = aten.tanh.default(%0) : f32[4,8]{8,1}
  %3 = aten.mm.default(%2, %1) : f32[4,8]{8,1}
  %4 = aten.tanh.default(%3) : f32[4,8]{8,1}
  %5 = aten.mm.default(%4, %1) : f32[4,8]{8,1}
  %6 = aten.exp.default(%5) : f32[4,8]{8,1}
  return (%6)
}
)");
  const auto& k = p.c_code.kernels;
  CHECK_EQ(k.size(), 3u);
  if (k.size() != 3) return;
  CHECK_EQ(k[0].function, k[0].name);
  CHECK_EQ(k[1].function, k[0].name);  // tanh again
  CHECK_EQ(k[2].function, k[2].name);  // exp: other text
  CHECK(k[0].args != k[1].args);
  const std::string& c = p.c_code.source;
  CHECK(c.find("void " + k[1].name + "(") == std::string::npos);
  CHECK(c.find("/* " + k[1].name + ": a0=buf") != std::string::npos);
  CHECK(c.find("; runs " + k[0].name + " */") != std::string::npos);
  CHECK_EQ(p.c_code.kernel_begin.size(), 3u);
}

TEST(generated_code_golden_split_batch_norm_stats) {
  Pipeline p(kBatchNormStats);
  CHECK(ember_test::matches_golden("batch_norm_stats_split.c", p.c_code.source));
}
