// split_reductions: program and schedule text in, schedule text out.
#include "check.h"
#include "pipeline_util.h"

using ember_test::after;
using ember_test::schedule_part;

TEST(split_a_full_sum_into_chunks) {
  // One row of a million elements: 61 chunks (at least 16k iterations each).
  CHECK_EQ(schedule_part(after(R"IR(program(vars=1)
buf0 = input(0) : f32[1000000]{1}
buf1 : f32[1]{1} for [_] = sum f32 over [1000000] for [v0] of buf0[v0]  from %1
return buf1:f32[]{}+0
schedule
kernel ember_k0 outer=[]
  stage 0 inner=[1000000]: buf1(sum)
    reduce buf1[0] = buf0[i0]
)IR", {"split_reductions"})),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 split=61 inner=[1000000]: buf1(sum)\n"
           "    reduce buf1[0] = buf0[i0]\n");
}

namespace {

// BatchNorm statistics over a channels-last activation: one row, two long vector
// reductions.
constexpr const char* kBatchNormStats = R"(graph {
  %0 = input(0) : f32[32,32,64,64]{131072,1,2048,32}
  %1 = aten.var_mean.correction(%0, [0, 2, 3], 0, true) : (f32[1,32,1,1]{32,1,1,1}, f32[1,32,1,1]{32,1,1,1})
  return (%1, %1.1)
}
)";

const std::vector<std::string> kSplit = {"lower_graph", "eliminate_dead_code", "fuse", "merge_inner_dims",
                                         "split_reductions"};

std::string summary(const std::string& graph) {
  return ember::schedule_summary(schedule_part(after(graph, kSplit)));
}

}  // namespace

TEST(split_long_reductions_of_few_row_kernels) {
  // The BatchNorm statistics run in 64 chunks of whole 256-step blocks.
  CHECK_EQ(summary(kBatchNormStats),
           "kernel ember_k0 outer=[]\n"
           "  stage 0 vector split=64 inner=[32,131072]: buf1(sum)\n"
           "  stage 1 vector split=64 inner=[32,131072]: buf2(sum) buf3(sum)\n"
           "  stage 2 inner=[32]: buf4 buf5\n");
  // Many rows: rows are the parallelism; short reductions stay whole.
  CHECK(summary(R"(graph {
  %0 = input(0) : f32[512,4096]{4096,1}
  %1 = aten.sum.dim_IntList(%0, [1], false) : f32[512]{1}
  %2 = input(1) : f32[64,64]{64,1}
  %3 = aten.amax.default(%2, [0, 1], false) : f32[]{}
  return (%1, %3)
}
)").find("split") == std::string::npos);
  // A scan is sequential.
  CHECK(summary(R"(graph {
  %0 = input(0) : f32[1048576]{1}
  %1 = aten.cumsum.default(%0, 0) : f32[1048576]{1}
  return (%1)
}
)").find("split") == std::string::npos);
}

TEST(split_stages_run_chunks_on_threads_and_combine_in_order) {
  ember_test::Pipeline p(R"(graph {
  %0 = input(0) : f32[1000000]{1}
  %1 = aten.sum.default(%0) : f32[]{}
  %2 = aten.argmax.default(%0) : i64[]{}
  return (%1, %2)
}
)");
  CHECK(p.schedule_text().find("split=61 inner=[1000000]") != std::string::npos);
  const std::string& c = p.c_code.source;
  // Up to 61 chunks (16k iterations each at least): 3907 blocks of 256 make 61 chunks of
  // 65 blocks, the last one shorter.
  CHECK(c.find("#pragma omp parallel for schedule(static) if (!omp_in_parallel())\n"
               "    for (int64_t ch = 0; ch < 61LL; ++ch) {\n"
               "      const int64_t ch_lo = ch * 16640LL, ch_hi = ch_lo + 16640LL < 1000000LL ? ch_lo + 16640LL : 1000000LL;") !=
        std::string::npos);
  CHECK(c.find("for (int64_t i0b = ch_lo; i0b < ch_hi; i0b += 256LL) {") != std::string::npos);
  // Partials combine from chunk 0 on, in order; a later arg partial wins only if strictly better.
  CHECK(c.find("for (int64_t ch = 1; ch < 61LL; ++ch) {") != std::string::npos);
  CHECK(c.find("if ((acc1_ch[ch] > comb5) || (acc1_ch[ch] != acc1_ch[ch] && comb5 == comb5)) { comb5 = acc1_ch[ch]; comb6 = arg2_ch[ch]; }") != std::string::npos);
  // Its launcher asks the prelude's ember_launch_rows to keep fewer rows than threads
  // serial (split_stages = 1), so that the split stages get the threads.
  CHECK(c.find("{ ember_launch_rows(" + p.c_code.kernels[0].name + ", rows, grain, 1, args); }") != std::string::npos);
  CHECK(c.find("if (rows <= grain || (split_stages && rows < omp_get_max_threads()))") != std::string::npos);
}

TEST(generated_code_golden_split_batch_norm_stats) {
  ember_test::Pipeline p(kBatchNormStats);
  CHECK(ember_test::matches_golden("batch_norm_stats_split.c", p.c_code.source));
}

TEST(split_long_reductions_of_a_symbolic_row_count) {
  // Two rows at the hint, any number at run time: split anyway (the launcher picks per
  // call between chunks on the threads and rows on the threads).
  CHECK_EQ(ember::schedule_summary(schedule_part(after(R"IR(program(s0=2; vars=2)
buf0 = input(0) : f32[s0,100000]{100000,1}
buf1 : f32[s0]{1} for [v0] = sum f32 over [100000] for [v1] of buf0[((v0 * 100000) + v1)]  from %1
return buf1
schedule
kernel ember_k0 outer=[s0]
  stage 0 inner=[100000]: buf1(sum)
    reduce buf1[o0] = buf0[((o0 * 100000) + i0)]
)IR", {"split_reductions"}))),
           "kernel ember_k0 outer=[s0]\n"
           "  stage 0 split=6 inner=[100000]: buf1(sum)\n");
}
