// Graphs the differential fuzzer (python -m ember.fuzz) found ember mishandling, minimized.
// Each compiles through the whole pipeline here; tests/python/test_fuzz_regressions.py runs
// the same programs against eager. Under EMBER_SANITIZE these also catch memory errors.
#include "check.h"
#include "pipeline_util.h"

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
  CHECK(p.code.source.find("scan") == std::string::npos);
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
  CHECK(p.code.source.find("--") == std::string::npos);
}
