// GCC gives up on vectorizing a loop silently (a `||` in a max, a wrapping index),
// and a scalar kernel is 10-40x slower. These tests compile the code generated for
// the common fused patterns with the JIT's own flags and require every
// `#pragma omp simd` loop to be reported as vectorized.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "jit/c_compiler.h"
#include "pipeline_util.h"

using ember_test::Pipeline;

using ember_test::count;

namespace {


// Source lines of `source` GCC reports a vectorized loop at; empty if it could not run.
std::vector<int> vectorized_lines(const std::string& source) {
  ember::CCompiler cc;
  std::string base = "/tmp/ember_vec_test_" + std::to_string(::getpid());
  std::ofstream(base + ".c") << source;
  std::string cmd = cc.path();
  for (const auto& f : cc.flags()) cmd += " " + f;
  cmd += " -fopt-info-vec-optimized " + base + ".c -o " + base + ".so 2>&1";
  std::vector<int> lines;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return lines;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  std::remove((base + ".c").c_str());
  std::remove((base + ".so").c_str());
  std::string tag = base + ".c:";
  for (size_t pos = out.find(tag); pos != std::string::npos; pos = out.find(tag, pos + 1)) {
    size_t eol = out.find('\n', pos);
    if (out.substr(pos, eol - pos).find("loop vectorized") != std::string::npos)
      lines.push_back(std::atoi(out.c_str() + pos + tag.size()));
  }
  return lines;
}

// Every `#pragma omp simd` loop must be vectorized: GCC reports it within a few
// lines of the pragma (reductions at the pragma, others at the loop body).
void check_all_simd_loops_vectorize(const char* graph) {
  Pipeline p(graph);
  std::vector<int> vec = vectorized_lines(p.c_code.source);
  std::istringstream in(p.c_code.source);
  std::string line;
  int n = 0, pragmas = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find("#pragma omp simd") == std::string::npos) continue;
    ++pragmas;
    bool found = false;
    for (int v : vec) found |= v >= n && v <= n + 3;
    if (!found) {
      std::cerr << "loop at line " << n << " did not vectorize:\n" << p.c_code.source << "\n";
      CHECK(found);
    }
  }
  CHECK(pragmas > 0);
}

}  // namespace

TEST(vectorizes_layer_norm) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[64,256]{256,1}
  %1 = input(1) : f32[256]{1}
  %2 = aten.var_mean.correction(%0, [1], 0, true) : (f32[64,1]{1,1}, f32[64,1]{1,1})
  %3 = aten.add.Tensor(%2, 1e-05, 1) : f32[64,1]{1,1}
  %4 = aten.rsqrt.default(%3) : f32[64,1]{1,1}
  %5 = aten.sub.Tensor(%0, %2.1, 1) : f32[64,256]{256,1}
  %6 = aten.mul.Tensor(%5, %4) : f32[64,256]{256,1}
  %7 = aten.mul.Tensor(%6, %1) : f32[64,256]{256,1}
  return (%7)
}
)");
}

// The row prefetch of an embedding's gathered rows (codegen/c/row_prefetch.cpp) sits in the
// row loop, outside the simd loops, which still vectorize.
TEST(vectorizes_embedding_layer_norm_with_row_prefetch) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : i64[2,64]{64,1}
  %1 = input(1) : f32[1000,128]{128,1}
  %2 = input(2) : f32[128]{1}
  %3 = aten.embedding.default(%1, %0, 1, false, false) : f32[2,64,128]{8192,128,1}
  %4 = aten.var_mean.correction(%3, [2], 0, true) : (f32[2,64,1]{64,1,1}, f32[2,64,1]{64,1,1})
  %5 = aten.add.Tensor(%4, 1e-05, 1) : f32[2,64,1]{64,1,1}
  %6 = aten.rsqrt.default(%5) : f32[2,64,1]{64,1,1}
  %7 = aten.sub.Tensor(%3, %4.1, 1) : f32[2,64,128]{8192,128,1}
  %8 = aten.mul.Tensor(%7, %6) : f32[2,64,128]{8192,128,1}
  %9 = aten.mul.Tensor(%8, %2) : f32[2,64,128]{8192,128,1}
  return (%9)
}
)");
}

TEST(vectorizes_softmax_and_gelu) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[64,128]{128,1}
  %1 = aten._softmax.default(%0, -1, false) : f32[64,128]{128,1}
  %2 = aten.gelu.default(%0, "tanh") : f32[64,128]{128,1}
  %3 = aten.gelu.default(%0, "none") : f32[64,128]{128,1}
  return (%1, %2, %3)
}
)");
}

// Softmax on the CPU scales each row by 1 / sum, as ATen's CPU kernel does: one division
// a row (hoisted out of the loop), not one an element.
TEST(cpu_softmax_scales_by_the_sums_reciprocal) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[64,128]{128,1}
  %1 = aten._softmax.default(%0, -1, false) : f32[64,128]{128,1}
  return (%1)
}
)");
  const std::string& c = p.c_code.source;
  CHECK(c.find("1.0f / acc") != std::string::npos);
  CHECK_EQ(count(c, "/ acc"), 1);
}

// The sum's stage stores exp(x - max) into a row-long array and the scaling stage reads
// it back (codegen/c/row_buffers.cpp): one exp per element, as in ATen's and Inductor's
// CPU softmax. Before, the scaling loop computed exp again.
TEST(cpu_softmax_computes_exp_once_per_element) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[64,128]{128,1}
  %1 = aten._softmax.default(%0, -1, false) : f32[64,128]{128,1}
  return (%1)
}
)");
  const std::string& c = p.c_code.source;
  CHECK_EQ(count(c, "= ember_expf("), 1);
  CHECK_EQ(count(c, "float rowbuf0[128];"), 1);
  CHECK_EQ(count(c, "rowbuf0[i0] = "), 1);
}

// Exact GELU's erf is the prelude's inline ember_erff, not libm's (libmvec's) erff call.
TEST(cpu_erf_is_computed_inline) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[64,128]{128,1}
  %1 = aten.gelu.default(%0, "none") : f32[64,128]{128,1}
  %2 = input(1) : f64[64]{1}
  %3 = aten.erf.default(%2) : f64[64]{1}
  return (%1, %3)
}
)");
  const std::string& c = p.c_code.source;
  CHECK_EQ(count(c, "= ember_erff("), 1);
  CHECK_EQ(count(c, "= erf("), 1);  // double keeps libm's
  CHECK_EQ(count(c, "= erff("), 0);
}

TEST(vectorizes_batch_norm_relu_max_pool) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[8,16,32,32]{16384,1024,32,1}
  %1 = input(1) : f32[16]{1}
  %2 = aten.sub.Tensor(%0, %1, 1) : f32[8,16,32,32]{16384,1024,32,1}
  %3 = aten.relu.default(%2) : f32[8,16,32,32]{16384,1024,32,1}
  %4 = aten.max_pool2d_with_indices.default(%3, [2, 2], [2, 2], [0, 0], [1, 1], false) : (f32[8,16,16,16]{4096,256,16,1}, i64[8,16,16,16]{4096,256,16,1})
  %5 = aten.mean.dim(%3, [-1, -2], true) : f32[8,16,1,1]{16,1,1,1}
  return (%4, %5)
}
)");
}

// The training CNN's shape: a 32-wide output row, the 64-bit index next to stride-2
// float loads (GCC's jump threading had left this loop scalar). With a ReLU fused into
// the loads GCC 12 still gives up ("no vectype" for the strided load); the CNN reads
// a realized ReLU output.
TEST(vectorizes_max_pool_with_indices_32_wide) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[4,8,64,64]{32768,4096,64,1}
  %1 = aten.max_pool2d_with_indices.default(%0, [2, 2], [], [0, 0], [1, 1], false) : (f32[4,8,32,32]{8192,1024,32,1}, i64[4,8,32,32]{8192,1024,32,1})
  return (%1, %1.1)
}
)");
}

// The gather form of max-pool's backward reads the window's saved index at w / 2: a
// vector gather, which needs the compiler's gather switch (probed; x86 GCC has one).
TEST(vectorizes_max_pool_backward_with_gathers) {
  bool gathers = false;
  for (const auto& f : ember::CCompiler().flags()) gathers |= f.rfind("-mtune-ctrl=use_gather", 0) == 0;
  if (!gathers) return;
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[4,8,32,32]{8192,1024,32,1}
  %1 = input(1) : f32[4,8,64,64]{32768,4096,64,1}
  %2 = input(2) : i64[4,8,32,32]{8192,1024,32,1}
  %3 = aten.max_pool2d_with_indices_backward.default(%0, %1, [2, 2], [], [0, 0], [1, 1], false, %2) : f32[4,8,64,64]{32768,4096,64,1}
  return (%3)
}
)");
}

// 512-bit vectors where the CPU has AVX-512: GCC's tuning for the Xeons it knows by name
// prefers 256 (two hosts of one CPU model ran ember's kernels at two widths, by GCC
// version), while Inductor's C++ kernels use 512 on any AVX-512 CPU.
TEST(prefers_512_bit_vectors_where_the_cpu_has_avx512) {
  bool wide = false, gcc = false;
  for (const auto& f : ember::CCompiler().flags()) {
    wide |= f == "-mprefer-vector-width=512";
    gcc |= f.rfind("-mtune-ctrl=", 0) == 0;  // GCC's spelling: the compiler takes GCC's switches
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool avx512 = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      avx512 = (line + " ").find(" avx512f ") != std::string::npos;
      break;
    }
  }
  if (!avx512) CHECK(!wide);
  if (avx512 && gcc) CHECK(wide);
}

TEST(vectorizes_channels_last_mean_and_column_max) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[8,32,16,16]{8192,1,512,32}
  %1 = aten.relu.default(%0) : f32[8,32,16,16]{8192,1,512,32}
  %2 = aten.mean.dim(%1, [-1, -2], true) : f32[8,32,1,1]{32,1,1,1}
  %3 = input(1) : f32[100,64]{64,1}
  %4 = aten.amax.default(%3, [0], false) : f32[64]{1}
  return (%2, %4)
}
)");
}

TEST(vectorizes_split_reductions) {
  check_all_simd_loops_vectorize(R"(graph {
  %0 = input(0) : f32[16,32,32,32]{32768,1,1024,32}
  %1 = aten.var_mean.correction(%0, [0, 2, 3], 0, true) : (f32[1,32,1,1]{32,1,1,1}, f32[1,32,1,1]{32,1,1,1})
  %2 = aten.amax.default(%0, [0, 2, 3], false) : f32[32]{1}
  %3 = input(1) : f32[1000000]{1}
  %4 = aten.sum.default(%3) : f32[]{}
  %5 = aten.amax.default(%3, [0], false) : f32[]{}
  return (%1, %1.1, %2, %4, %5)
}
)");
}

// Lines of the innermost `for (int64_t i0 ...)` loops of `source` whose bodies contain
// `step_text`, each with whether a `#pragma omp simd` precedes it.
std::vector<bool> simd_of_loops_with(const std::string& source, const std::string& step_text) {
  std::istringstream in(source);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<bool> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t at = lines[i].find("for (int64_t i0 = 0;");
    if (at == std::string::npos) continue;
    std::string body;  // up to the loop's closing brace, at its indentation
    for (size_t j = i + 1; j < lines.size() && lines[j].find_first_not_of(' ') > at; ++j) body += lines[j] + "\n";
    if (body.find(step_text) != std::string::npos) out.push_back(lines[i - 1].find("#pragma omp simd") != std::string::npos);
  }
  return out;
}

// A max-pool of an NCHW tensor, realized channels-last for a convolution, read the input
// 1,024 elements apart per channel when it iterated in the output's order. Under `omp
// simd` GCC built that loop from thousands of permutes (93 KB of code, 2.5 s to compile,
// 60x slower than scalar). Lowering now walks such a copy along the input's rows (loads
// 2 apart, stores 16 apart: 7x faster than the scalar loop), under the pragma.
TEST(channels_last_pool_walks_the_input_rows) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,16,32,32]{16384,1024,32,1}
  %1 = input(1) : f32[32,16,3,3]{144,9,3,1}
  %2 = aten.relu.default(%0) : f32[8,16,32,32]{16384,1024,32,1}
  %3 = aten.max_pool2d_with_indices.default(%2, [2, 2], [2, 2], [0, 0], [1, 1], false) : (f32[8,16,16,16]{4096,256,16,1}, i64[8,16,16,16]{4096,256,16,1})
  %4 = aten.convolution.default(%3, %1, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : f32[8,32,16,16]{8192,256,16,1}
  return (%4)
}
)");
  CHECK(simd_of_loops_with(p.c_code.source, "i0 * 1024LL").empty());
  std::vector<bool> rows = simd_of_loops_with(p.c_code.source, "i0 * 2LL");
  CHECK(!rows.empty());
  for (bool simd : rows) CHECK(simd);
}

// Where no dim of the input steps little (a 3x3 window at stride 3), the copy keeps the
// output's order, and its loop of wide-step loads runs without the pragma.
TEST(wide_step_loads_run_without_simd) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,16,33,33]{17424,1089,33,1}
  %1 = input(1) : f32[32,16,3,3]{144,9,3,1}
  %2 = aten.relu.default(%0) : f32[8,16,33,33]{17424,1089,33,1}
  %3 = aten.max_pool2d_with_indices.default(%2, [3, 3], [3, 3], [0, 0], [1, 1], false) : (f32[8,16,11,11]{1936,121,11,1}, i64[8,16,11,11]{1936,121,11,1})
  %4 = aten.convolution.default(%3, %1, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : f32[8,32,11,11]{3872,121,11,1}
  return (%4)
}
)");
  std::vector<bool> wide = simd_of_loops_with(p.c_code.source, "i0 * 1089LL");
  CHECK(!wide.empty());
  for (bool simd : wide) CHECK(!simd);
  CHECK(count(p.c_code.source, "#pragma omp simd") > 0);
}
