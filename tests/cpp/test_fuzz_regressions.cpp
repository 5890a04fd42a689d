// Graphs the differential fuzzer (python -m ember.fuzz) found ember mishandling, minimized.
// Each compiles through the whole pipeline here; tests/python/test_fuzz_regressions.py runs
// the same programs against eager. Under EMBER_SANITIZE these also catch memory errors.
#include <cmath>

#include "check.h"
#include "codegen/cuda/kernel.h"
#include "ir/expr.h"
#include "lower/lowering.h"
#include "lower/program_text.h"
#include "pipeline_util.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"

using namespace ember;
using ember_test::Pipeline;

// A reduction over dim -1 of a 0-d tensor wrote one element past an empty vector.
TEST(fuzz_reduction_of_zero_dim_tensor) {
  Pipeline p(R"(graph {
  %0 = input(0) : bool[]{}
  %1 = input(1) : f32[]{}
  %2 = aten.any.dim(%0, -1, false) : bool[]{}
  %3 = aten.amax.default(%1, [], false) : f32[]{}
  %4 = aten.sum.dim_IntList(%1, [0], true, none) : f32[]{}
  return (%2, %3, %4)
}
)");
  CHECK_EQ(p.program.computed.size(), size_t(3));
}

// A scan along a unit dim left its loop variable unbound in codegen.
TEST(fuzz_cumsum_along_unit_dim) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[17,4,1]{1,17,1}
  %1 = aten.cumsum.default(%0, 2, none) : f32[17,4,1]{4,1,1}
  %2 = input(1) : i32[1,2]{2,1}
  %3 = aten.cumprod.default(%2, 0, "f64") : f64[1,2]{2,1}
  return (%1, %3)
}
)");
  CHECK(p.c_code.source.find("scan") == std::string::npos);
}

// The negation of a negative constant printed as "--5LL", a decrement: a C compiler
// error. (isinf of an integer is the constant false, so the masked_fill folds to -5.)
TEST(fuzz_negated_negative_constant_compiles) {
  Pipeline p(R"(graph {
  %0 = input(0) : i64[4]{1}
  %1 = aten.isinf.default(%0) : bool[4]{1}
  %2 = aten.le.Scalar(%1, 0) : bool[4]{1}
  %3 = aten.masked_fill.Scalar(%0, %2, -5) : i64[4]{1}
  %4 = aten.neg.default(%3) : i64[4]{1}
  return (%4)
}
)");
  CHECK(p.c_code.source.find("--") == std::string::npos);
}

namespace {
size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
const char* kHalfChain = R"(graph {
  %0 = input(0) : f16[64]{1}
  %1 = aten.mul.Tensor(%0, %0) : f16[64]{1}%s
  %2 = aten.add.Tensor(%1, 1.0, 1) : f16[64]{1}
  return (%2)
}
)";
std::string half_chain(bool internal) {
  std::string t = kHalfChain;
  t.replace(t.find("%s"), 2, internal ? " internal" : "");
  return t;
}
}  // namespace

// Seeds 4647, 4845, 7721: eager rounds each op's f16 result; fused into one kernel,
// the product was read unrounded by the add. With emulate_precision_casts, only a
// decomposition's intermediate (`internal`) stays unrounded; without it (the default,
// Inductor's), neither is rounded.
TEST(fuzz_half_results_rounded_between_ops) {
  Pipeline rounded(half_chain(false), ember_test::emulating_precision_casts());
  Pipeline unrounded(half_chain(true), ember_test::emulating_precision_casts());
  Pipeline by_default(half_chain(false));
  CHECK_EQ(rounded.schedule.kernels.size(), size_t(1));
  CHECK_EQ(count_of(rounded.c_code.source, "ember_round_h") , count_of(unrounded.c_code.source, "ember_round_h") + 1);
  CHECK_EQ(count_of(by_default.c_code.source, "ember_round_h"), count_of(unrounded.c_code.source, "ember_round_h"));
  CHECK(parse_graph(print_graph(unrounded.graph)).nodes[1].internal);
  CHECK(!parse_graph(print_graph(rounded.graph)).nodes[1].internal);
}

// Seed 10024: a float sum over 528,771 elements kept one f32 accumulator per SIMD
// lane (4 digits lost). Sums longer than a block add block partials into a double.
TEST(fuzz_long_float_sums_accumulate_per_block) {
  Pipeline row(R"(graph {
  %0 = input(0) : f32[3,600000]{600000,1}
  %1 = aten.sum.dim_IntList(%0, [1], false, none) : f32[3]{1}
  return (%1)
}
)");
  CHECK(row.c_code.source.find("_w += ") != std::string::npos);
  Pipeline column(R"(graph {
  %0 = input(0) : f32[200000,64]{64,1}
  %1 = aten.sum.dim_IntList(%0, [0], false, none) : f32[64]{1}
  return (%1)
}
)");
  CHECK(column.c_code.source.find("_w[cb + l] += ") != std::string::npos);
  Pipeline short_row(R"(graph {
  %0 = input(0) : f32[3,200]{200,1}
  %1 = aten.sum.dim_IntList(%0, [1], false, none) : f32[3]{1}
  return (%1)
}
)");
  CHECK(short_row.c_code.source.find("_w") == std::string::npos);
}

// Seed 13214: constants rounded to f16/bf16 kept f32's range: 1e30 stayed finite in
// f16 (eager: inf) and subnormals kept a normal's precision.
TEST(fuzz_half_constants_respect_range) {
  CHECK(std::isinf(float_const(1e30, DType::F16)->fval));
  CHECK(std::isinf(float_const(-65520.0, DType::F16)->fval) && float_const(-65520.0, DType::F16)->fval < 0);
  CHECK_EQ(float_const(65519.0, DType::F16)->fval, 65504.0);
  CHECK_EQ(float_const(3e-8, DType::F16)->fval, std::ldexp(1.0, -25) * 2);  // nearest subnormal step 2^-24
  CHECK_EQ(float_const(2e-8, DType::F16)->fval, 0.0);
  CHECK(std::isinf(float_const(3.4e38, DType::BF16)->fval));
  CHECK_EQ(float_const(3.3961e38, DType::BF16)->fval, 3.3895313892515355e38);  // below the halfway point
  CHECK_EQ(float_const(1.0 + 1.0 / 256, DType::BF16)->fval, 1.0);  // ties to even
}

// Seeds 7799, 13698 (torch 2.11 keeps var.correction whole): a reduction over a
// zero-size dim inside a cross-row (vector) stage divided by the zero extent in
// codegen: SIGFPE in the compiler.
TEST(fuzz_vector_reduction_over_zero_size_dims) {
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[9,3,0,8]{24,8,8,1}
  %1 = aten.var.correction(%0, [1, 2], 1, true) : bf16[9,1,1,8]{8,8,8,1}
  %2 = aten.sum.dim_IntList(%0, [1, 2], true, none) : bf16[9,1,1,8]{8,8,8,1}
  return (%1, %2)
}
)");
  CHECK(!p.c_code.source.empty());
}

// Seed 72148: (float)(int64_t)x is a truncation whose zero has no sign. gcc fuses the two
// conversions into trunc() (-0.0 for x = -0.3) after dropping a literal + 0.0f, so the
// sum with a zero it cannot see (declared once per function) must stay in the source,
// for f32 and f64 (an f16 result rounds the f32 value).
TEST(fuzz_float_int64_float_adds_an_opaque_zero) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8]{1}
  %1 = aten._to_copy.default(%0, "i64", none, none, none, false, none) : i64[8]{1}
  %2 = aten.div.Tensor_mode(%1, %0, "trunc") : f32[8]{1}
  %3 = input(1) : f64[8]{1}
  %4 = aten._to_copy.default(%3, "i64", none, none, none, false, none) : i64[8]{1}
  %5 = aten._to_copy.default(%4, "f64", none, none, none, false, none) : f64[8]{1}
  %6 = aten._to_copy.default(%1, "f16", none, none, none, false, none) : f16[8]{1}
  return (%2, %5, %6)
}
)");
  const std::string& c = p.c_code.source;
  CHECK(c.find("volatile float zero") != std::string::npos);
  CHECK(c.find("volatile double zero") != std::string::npos);
  CHECK_EQ(count_of(c, " + zero"), size_t(2));  // the f16 result rounds the f32 value
}

// Seed 80280 (--dynamic): inner dims whose strides are symbolic (a view of an input
// with symbolic sizes) were not merged, so a [13,16] reduction summed row by row with a
// symbolic size and in one 208-long loop without: another order, another rounding.
// Merged on canonical forms, both paths loop (and sum) the same way.
TEST(fuzz_inner_dims_with_symbolic_strides_merge) {
  Pipeline p(R"(graph(s0=17) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f32[13,16,s0]{16*s0,s0,1}
  %2 = aten.select.int(%1, 2, 9) : f32[13,16]{16*s0,s0}
  %3 = aten.sum.dim_IntList(%2, [0, 1], false, none) : f32[]{}
  %4 = aten.mul.Tensor(%2, 2.0) : f32[13,16]{16,1}
  return (%3, %4)
}
)");
  CHECK_EQ(schedule_summary(p.schedule_text()), "kernel ember_red_sum_mul_0 outer=[]\n  stage 0 inner=[208]: buf1(sum) buf2\n");
  // Not contiguous together (the row stride is not 16 times the column stride): kept.
  Pipeline q(R"(graph(s0=17) {
  %0 = sym_input(0, s0) : none
  %1 = input(1) : f32[13,16,s0]{17*s0,s0,1}
  %2 = aten.select.int(%1, 2, 9) : f32[13,16]{17*s0,s0}
  %3 = aten.sum.dim_IntList(%2, [0, 1], false, none) : f32[]{}
  return (%3)
}
)");
  CHECK_EQ(schedule_summary(q.schedule_text()), "kernel ember_red_sum_0 outer=[]\n  stage 0 inner=[13,16]: buf1(sum)\n");
}

// Seed 80280: layer_norm's mean (var_mean's) of values near 139 was sum / n, off by the
// rounding of the offset's sum; the second pass now also sums the deviations and the
// mean is m + sum(x - m) / n.
TEST(fuzz_var_mean_mean_is_corrected_by_the_deviations_sum) {
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,208]{208,1}
  %1 = aten.var_mean.correction(%0, [1], 0, true) : (f32[2,1]{1,1}, f32[2,1]{1,1})
  return (%1, %1.1)
}
)");
  CHECK_EQ(schedule_summary(p.schedule_text()), "kernel ember_red_var_mean_0 outer=[2]\n  stage 0 inner=[208]: buf1(sum)\n"
                                                 "  stage 1 inner=[208]: buf2(sum) buf3(sum)\n  stage 2 inner=[]: buf4 buf5\n");
}

// The GPU campaign's NVRTC slice (seeds 355, 554, 807 of the f32/bf16/f16 programs):
// a reduction over a dim of size 1 is a per-row stage (no inner dims) with a pointwise
// value beside its reduction (logsumexp's max with infinities zeroed; var_mean's mean).
// The CUDA printer bound that value inside the stage's one-iteration loop, and the next
// stage, which reads it from a register, failed: "codegen: unknown buffer 2".
TEST(fuzz_cuda_per_row_stage_keeps_its_values_for_later_stages) {
  const std::string text = R"(graph {
  %0 = input(0) : bf16[2,17,64,1]{1,128,2,1}
  %1 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[2,17,64,1]{1,128,2,1} internal
  %2 = aten.amax.default(%1, [3], true) : f32[2,17,64,1]{1088,64,1,1} internal
  %3 = aten.abs.default(%2) : f32[2,17,64,1]{1088,64,1,1} internal
  %4 = aten.eq.Scalar(%3, inf) : bool[2,17,64,1]{1088,64,1,1} internal
  %5 = aten.scalar_tensor.default(0.0, "f32", "strided", "cpu", none) : f32[]{} internal
  %6 = aten.where.self(%4, %5, %2) : f32[2,17,64,1]{1088,64,1,1} internal
  %7 = aten.squeeze.dims(%6, [3]) : f32[2,17,64]{1088,64,1} internal
  %8 = aten.sub.Tensor(%1, %6, 1) : f32[2,17,64,1]{1,128,2,1} internal
  %9 = aten.exp.default(%8) : f32[2,17,64,1]{1,128,2,1} internal
  %10 = aten.sum.dim_IntList(%9, [3], false, none) : f32[2,17,64]{1088,64,1} internal
  %11 = aten.log.default(%10) : f32[2,17,64]{1088,64,1} internal
  %12 = aten.add.Tensor(%11, %7, 1) : f32[2,17,64]{1088,64,1} internal
  %13 = aten._to_copy.default(%12, "bf16", none, none, none, false, none) : bf16[2,17,64]{1088,64,1}
  return (%13)
}
)";
  Graph g = parse_graph(text);
  Program prog = lower_graph(g);
  eliminate_dead_code(prog);
  Schedule s = fuse(prog, FuseOptions{});
  merge_inner_dims(s);
  CHECK_EQ(schedule_summary(print_schedule(s, prog)),
           "kernel ember_k0 outer=[2,17,64]\n  stage 0 inner=[]: buf1(max)\n"
           "  stage 1 inner=[]: buf2 buf3(sum)\n  stage 2 inner=[]: buf4\n");
  std::string source;
  try {
    CudaSchedule cs = schedule_cuda(prog, s);
    source = generate_cuda(prog, s, cs).source;
  } catch (const std::exception& e) {
    CHECK_EQ(std::string(e.what()), "");
  }
  CHECK(source.find("if (tid == 0) b4[") != std::string::npos);
}

// Dynamic fuzz seed 370261: clamp(remainder(u8 x, 1), -3, 1). Eager converts -3 to u8 (253),
// so the clamp gives 1; a constant that kept -3 let the simplifier, which knows
// remainder(x, 1) >= 0, drop the clamp. An integer constant holds its dtype's value.
TEST(fuzz_u8_clamp_bound_wraps) {
  CHECK_EQ(int_const(-3, DType::U8)->ival, int64_t(253));
  CHECK_EQ(int_const(200, DType::I8)->ival, int64_t(-56));
  CHECK_EQ(int_const(-3, DType::I64)->ival, int64_t(-3));
  Pipeline p(R"(graph {
  %0 = input(0) : u8[]{}
  %1 = aten.remainder.Scalar(%0, 1) : u8[]{}
  %2 = aten.clamp.default(%1, -3, 1) : u8[]{}
  return (%2)
}
)");
  // min(max(x mod 1, 253), 1) is the constant 1 (it was x mod 1).
  const std::string text = print_program(p.program);
  CHECK(text.find("= 1:u8") != std::string::npos);
  CHECK(text.find("mod(") == std::string::npos);
}
