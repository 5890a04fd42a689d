// generate_c: golden C for a few kernels (tests/cpp/golden/, EMBER_UPDATE_GOLDEN=1 to
// accept a change), and the sharing of functions between kernels.
#include "check.h"
#include "pipeline_util.h"

using ember_test::Pipeline;

TEST(generated_code_golden_layer_norm) {
  Pipeline p(R"(graph {
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
)");
  CHECK(ember_test::matches_golden("layer_norm.c", p.c_code.source));
  // mean, variance and the mean's correction (the deviations' sum, beside their
  // squares') stay in registers: only the input, weight and output are arguments.
  CHECK_EQ(p.c_code.kernels[0].args.size(), 3u);
  CHECK(!p.c_code.buffer_in_memory[2]);
  CHECK(!p.c_code.buffer_in_memory[3]);
  CHECK(!p.c_code.buffer_in_memory[4]);
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

// Every launcher is one call of the prelude's ember_launch_rows: a graph's source has one
// parallel region for its rows however many kernels it has (each region is a function of
// its own for the C compiler: one a kernel was 20-30% of GCC's time on a model's graph).
TEST(launchers_share_the_preludes_parallel_region) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = input(1) : f32[8,8]{8,1}
  %2 = aten.tanh.default(%0) : f32[4,8]{8,1}
  %3 = aten.mm.default(%2, %1) : f32[4,8]{8,1}
  %4 = aten.sigmoid.default(%3) : f32[4,8]{8,1}
  %5 = aten.mm.default(%4, %1) : f32[4,8]{8,1}
  %6 = aten.exp.default(%5) : f32[4,8]{8,1}
  return (%6)
}
)");
  const auto& k = p.c_code.kernels;
  const std::string& c = p.c_code.source;
  CHECK_EQ(k.size(), 3u);
  size_t regions = 0;
  for (size_t at = c.find("#pragma omp parallel"); at != std::string::npos; at = c.find("#pragma omp parallel", at + 1))
    ++regions;
  CHECK_EQ(regions, 1u);
  CHECK(c.find("static __attribute__((noinline, unused)) void ember_launch_rows(") < p.c_code.kernel_begin.front());
  for (const auto& info : k) {
    CHECK(c.find("void " + info.name + "_launch(int64_t rows, int64_t grain, char* const* args) { ember_launch_rows(" +
                 info.name + ", rows, grain, 0, args); }") != std::string::npos);
  }
}
