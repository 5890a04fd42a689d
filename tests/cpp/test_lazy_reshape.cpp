// Reshapes of lazy values (lower/ops_view.cpp, lazy_reshape): an index remap where the
// innermost index stays affine, stored in the producer's shape when realized.
#include "check.h"
#include "ir/simplify.h"
#include "pipeline_util.h"

using namespace ember;
using ember_test::Pipeline;

TEST(reshape_merging_outer_dims_of_a_lazy_value_is_not_realized) {
  // The product is read through the reshape: one buffer, one kernel, no copy.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,3,5]{15,5,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f32[4,3,5]{15,5,1}
  %2 = aten.view.default(%1, [12, 5]) : f32[12,5]{5,1}
  %3 = aten.add.Tensor(%2, 1.0, 1) : f32[12,5]{5,1}
  return (%3)
}
)");
  CHECK_EQ(p.program.computed.size(), 1u);
  CHECK_EQ(p.schedule.kernels.size(), 1u);
}

TEST(window_reverse_of_a_lazy_value_reads_through_the_permute) {
  // Swin's window reverse: split, permute, clone, merge; the residual add reads the
  // producer at the permuted index instead of two copies materializing it.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[8,4,6]{24,6,1}
  %1 = input(1) : f32[2,16,6]{96,6,1}
  %2 = aten.mul.Tensor(%0, 2.0) : f32[8,4,6]{24,6,1}
  %3 = aten.view.default(%2, [2, 2, 2, 2, 2, 6]) : f32[2,2,2,2,2,6]{96,48,24,12,6,1}
  %4 = aten.permute.default(%3, [0, 1, 3, 2, 4, 5]) : f32[2,2,2,2,2,6]{96,48,12,24,6,1}
  %5 = aten.clone.default(%4, "contiguous_format") : f32[2,2,2,2,2,6]{96,48,24,12,6,1}
  %6 = aten.view.default(%5, [2, 16, 6]) : f32[2,16,6]{96,6,1}
  %7 = aten.add.Tensor(%1, %6, 1) : f32[2,16,6]{96,6,1}
  return (%7)
}
)");
  CHECK_EQ(p.program.computed.size(), 1u);
  CHECK_EQ(p.schedule.kernels.size(), 1u);
}

TEST(realized_reshape_is_stored_in_the_producers_shape) {
  // The matmul needs memory: the product is stored as [2,3,4] (its own kernel's shape,
  // which fuses with its producer) and viewed as [6,4], not stored as [6,4].
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,3,4]{12,4,1}
  %1 = input(1) : f32[4,5]{5,1}
  %2 = aten.mul.Tensor(%0, 2.0) : f32[2,3,4]{12,4,1}
  %3 = aten.view.default(%2, [6, 4]) : f32[6,4]{4,1}
  %4 = aten.mm.default(%3, %1) : f32[6,5]{5,1}
  return (%4)
}
)");
  CHECK_EQ(p.program.computed.size(), 1u);
  const Buffer& b = p.program.buffers[p.program.computed[0].buffer];
  CHECK(b.sizes == (Dims{2, 3, 4}));
}

TEST(reshape_dividing_the_innermost_index_realizes_its_input) {
  // [4,6] -> [3,8]: the new inner index would need a division per element.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,6]{6,1}
  %1 = aten.mul.Tensor(%0, 2.0) : f32[4,6]{6,1}
  %2 = aten.view.default(%1, [3, 8]) : f32[3,8]{8,1}
  %3 = aten.add.Tensor(%2, 1.0, 1) : f32[3,8]{8,1}
  return (%3)
}
)");
  CHECK_EQ(p.program.computed.size(), 2u);
}

TEST(reshape_of_a_costly_lazy_value_realizes_it) {
  // Recomputing exp(exp(x)) at every read (a softmax reads its input three times) costs
  // more than storing it once.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[4,3,5]{15,5,1}
  %1 = aten.exp.default(%0) : f32[4,3,5]{15,5,1}
  %2 = aten.exp.default(%1) : f32[4,3,5]{15,5,1}
  %3 = aten.view.default(%2, [12, 5]) : f32[12,5]{5,1}
  %4 = aten.add.Tensor(%3, 1.0, 1) : f32[12,5]{5,1}
  return (%4)
}
)");
  CHECK_EQ(p.program.computed.size(), 2u);
}

TEST(floor_division_of_a_non_negative_index_is_c_division) {
  // v0 in [0, 12): v0 // 3 and v0 % 3 need no sign tests; v0 // 13 is 0, v0 % 13 is v0.
  std::unordered_map<int, int64_t> extents{{0, 12}};
  Expr v = var(0);
  CHECK(simplify_bounds(binary(ExprOp::FloorDiv, v, int_const(3), DType::I64), extents)->op == ExprOp::TruncDiv);
  CHECK(simplify_bounds(binary(ExprOp::Mod, v, int_const(3), DType::I64), extents)->op == ExprOp::Fmod);
  CHECK(simplify_bounds(binary(ExprOp::FloorDiv, v, int_const(13), DType::I64), extents)->is_int_const(0));
  CHECK(simplify_bounds(binary(ExprOp::Mod, v, int_const(13), DType::I64), extents) == v);
  // A possibly negative value keeps Python's rounding.
  Expr shifted = binary(ExprOp::Sub, v, int_const(5), DType::I64);
  CHECK(simplify_bounds(binary(ExprOp::FloorDiv, shifted, int_const(3), DType::I64), extents)->op == ExprOp::FloorDiv);
}
