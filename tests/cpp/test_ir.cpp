// The IR pieces: dtype promotion, expression folding and analysis, graph text.
#include <cmath>

#include "check.h"
#include "ir/affine.h"
#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/graph.h"
#include "ir/monotone.h"
#include "ir/symbolic_affine.h"

using namespace ember;

TEST(promotion_follows_torch_result_type) {
  CHECK(promote_types(DType::F16, DType::BF16) == DType::F32);
  CHECK(promote_types(DType::I32, DType::F16) == DType::F16);
  CHECK(promote_types(DType::U8, DType::I8) == DType::I16);
  CHECK(promote_types(DType::Bool, DType::I32) == DType::I32);
  // int tensor + python float -> default float
  Operand a[] = {{DType::I64, OperandKind::Tensor}, {DType::F64, OperandKind::Scalar}};
  CHECK(result_type(a, 2) == DType::F32);
  // f16 tensor + python float stays f16
  Operand b[] = {{DType::F16, OperandKind::Tensor}, {DType::F64, OperandKind::Scalar}};
  CHECK(result_type(b, 2) == DType::F16);
  // f32 tensor + f64 0-dim tensor stays f32 (same category, tensor wins)
  Operand c[] = {{DType::F32, OperandKind::Tensor}, {DType::F64, OperandKind::ZeroDim}};
  CHECK(result_type(c, 2) == DType::F32);
  // i32 tensor + f64 0-dim tensor -> f64 (higher category, zero-dim decides)
  Operand d[] = {{DType::I32, OperandKind::Tensor}, {DType::F64, OperandKind::ZeroDim}};
  CHECK(result_type(d, 2) == DType::F64);
  // bool tensor + python int -> i64
  Operand e[] = {{DType::Bool, OperandKind::Tensor}, {DType::I64, OperandKind::Scalar}};
  CHECK(result_type(e, 2) == DType::I64);
}

TEST(index_arithmetic_folds) {
  Expr i = var(0), j = var(1);
  CHECK(add(int_const(2), int_const(3))->is_int_const(5));
  CHECK(mul(i, 1) == i);
  CHECK(mul(i, 0)->is_int_const(0));
  CHECK(add(i, 0) == i);
  // constants gather on the right: (i + 2) + 3 == i + 5
  CHECK(equal(add(add(i, 2), 3), add(i, 5)));
  CHECK_EQ(to_string(add(mul(i, 8), j)), "((v0 * 8) + v1)");
}

TEST(structural_equality_and_hash) {
  Expr a = binary(ExprOp::Add, load(3, var(0), DType::F32), float_const(1.0), DType::F32);
  Expr b = binary(ExprOp::Add, load(3, var(0), DType::F32), float_const(1.0), DType::F32);
  Expr c = binary(ExprOp::Add, load(3, var(1), DType::F32), float_const(1.0), DType::F32);
  CHECK(equal(a, b));
  CHECK(a->hash == b->hash);
  CHECK(!equal(a, c));
}

TEST(affine_analysis) {
  Expr i = var(0), j = var(1);
  Expr e = add(add(mul(i, 8), mul(j, 2)), 5);
  CHECK_EQ(*coefficient(e, 0), 8);
  CHECK_EQ(*coefficient(e, 1), 2);
  auto f = affine_form(e);
  CHECK(f.has_value());
  CHECK_EQ(f->constant, 5);
  // j*2 + i*8 + 5 addresses the same element as i*8 + j*2 + 5
  CHECK(same_index(e, add(add(mul(j, 2), mul(i, 8)), 5)));
  // a gather index is not affine in the var it reads through
  Expr g = mul(cast(load(7, i, DType::I64), DType::I64), 4);
  CHECK(!coefficient(g, 0).has_value());
  CHECK(!affine_form(g).has_value());
}

TEST(substitute_returns_same_node_when_unchanged) {
  Expr e = add(mul(var(0), 4), var(1));
  CHECK(substitute(e, {{5, var(9)}}) == e);
  Expr s = substitute(e, {{0, int_const(2)}});
  CHECK_EQ(to_string(s), "(v1 + 8)");
}

TEST(replace_swaps_one_node_everywhere_it_is_used) {
  Expr x = load(3, add(mul(var(0), 8), var(1)), DType::BF16);
  Expr y = cast(x, DType::F32);
  Expr e = binary(ExprOp::Add, binary(ExprOp::Mul, y, y, DType::F32), float_const(1), DType::F32);
  Expr r = replace(e, x.get(), cast(float_const(2), DType::BF16));
  CHECK(to_string(r).find("load") == std::string::npos);
  CHECK(replace(e, var(7).get(), var(8)) == e);  // nothing to replace: the same node
}

// A channels-last BatchNorm + ReLU of a value at [n, c, h, w] (vars 0..3): the input load
// depends on h and w, the statistics on c alone.
namespace {
Expr batch_norm_relu_of(Expr x) {
  Expr c = var(1);
  auto per_channel = [&](int b) { return cast(load(b, c, DType::BF16), DType::F32); };
  Expr y = binary(ExprOp::Sub, cast(x, DType::F32), per_channel(1), DType::F32);
  y = binary(ExprOp::Mul, y, per_channel(2), DType::F32);
  y = binary(ExprOp::Add, y, per_channel(3), DType::F32);
  return binary(ExprOp::Max, rounding_cast(y, DType::BF16), float_const(0, DType::BF16), DType::BF16);
}
Expr activation() { return load(0, add(add(mul(var(0), 4096), mul(var(2), 512)), add(mul(var(3), 8), var(1))), DType::BF16); }
}  // namespace

TEST(monotone_load_finds_the_one_varying_input_of_a_batch_norm_relu) {
  Expr x = activation();
  auto m = monotone_load(batch_norm_relu_of(x), {2, 3});
  CHECK(m && m->load == x && m->arithmetic);
  // A plain (widened) load is monotone but saves nothing.
  auto plain = monotone_load(cast(x, DType::F32), {2, 3});
  CHECK(plain && !plain->arithmetic);
  // Through an exp of a negation (decreasing) and a Where on a per-channel condition.
  Expr c_ok = binary(ExprOp::Gt, load(4, var(1), DType::F32), float_const(0), DType::Bool);
  Expr e = where(c_ok, unary(ExprOp::Exp, unary(ExprOp::Neg, cast(x, DType::F32), DType::F32), DType::F32), float_const(0));
  CHECK(monotone_load(e, {2, 3}).has_value());
}

TEST(monotone_load_refuses_what_is_not_monotone) {
  Expr x = activation();
  Expr f = cast(x, DType::F32);
  auto refused = [](const Expr& e) { return !monotone_load(e, {2, 3}).has_value(); };
  // x * sigmoid(x): the load used twice.
  CHECK(refused(binary(ExprOp::Mul, f, unary(ExprOp::Sigmoid, f, DType::F32), DType::F32)));
  CHECK(refused(unary(ExprOp::Abs, f, DType::F32)));
  CHECK(refused(binary(ExprOp::Div, float_const(1), f, DType::F32)));  // 1 / x
  // A condition on the load itself (a leaky ReLU written as a select).
  CHECK(refused(where(binary(ExprOp::Gt, f, float_const(0), DType::Bool), f, binary(ExprOp::Mul, f, float_const(0.1), DType::F32))));
  // The spatial index used outside the load (a position-dependent mask).
  CHECK(refused(binary(ExprOp::Add, f, cast(var(2), DType::F32), DType::F32)));
  // Two different loads that vary along the window.
  Expr other = cast(load(5, add(mul(var(2), 64), var(3)), DType::F32), DType::F32);
  CHECK(refused(binary(ExprOp::Add, f, other, DType::F32)));
  // An integer narrowing wraps.
  CHECK(refused(cast(cast(x, DType::I64), DType::I8)));
  // Nothing varies: no load to pool through.
  CHECK(refused(cast(load(1, var(1), DType::F32), DType::F32)));
}

TEST(graph_text_round_trips) {
  const char* text = R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = aten.add.Tensor(%0, 1.5, 1) : f32[4,8]{8,1}
  %2 = aten.var_mean.correction(%1, [1], 0, true) : (f32[4,1]{1,1}, f32[4,1]{1,1})
  %3 = aten.full.default([2], -inf, "f32", none, "cpu", false) : f32[2]{1}
  return (%1, %2.1, %3)
}
)";
  Graph g = parse_graph(text);
  CHECK_EQ(g.nodes.size(), 4u);
  CHECK_EQ(g.nodes[2].outputs.size(), 2u);
  CHECK(g.outputs[1].ref == (ValueRef{2, 1}));
  CHECK(std::isinf(g.nodes[3].args[1].f) && g.nodes[3].args[1].f < 0);
  CHECK_EQ(print_graph(g), std::string(text));
  CHECK_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
}

TEST(graph_parser_reports_errors) {
  CHECK_THROWS(parse_graph("graph { %0 = input(0) : f32[2]{1} return (%1) "));
  CHECK_THROWS(parse_graph("graph { %1 = input(0) : f32[2]{1}\n return (%1) }"));
  CHECK_THROWS(parse_graph("graph { %0 = input(0) : q32[2]{1}\n return (%0) }"));
  CHECK_THROWS(parse_graph("graph { %0 = aten.neg.default(%0) : f32[2]{1}\n return (%0) }"));
}

TEST(symbolic_affine_form_keeps_symbolic_coefficients) {
  // o0 * (3072 * s1) + o1 * 3072 + i0: coefficients 3072*s1, 3072 and 1.
  const int o0 = 100, o1 = 101, i0 = 102;
  Expr s1 = sym(1);
  Expr e = add(add(mul(var(o0), mul(int_const(3072), s1)), mul(var(o1), int_const(3072))), var(i0));
  auto f = symbolic_affine_form(e);
  CHECK(f.has_value());
  CHECK(f->coef.at(o0) == Dim(int64_t{3072}) * Dim::of(s1, 4));
  CHECK(f->coef.at(o1) == Dim(int64_t{3072}));
  CHECK(f->coef.at(i0) == Dim(int64_t{1}));
  CHECK(f->constant == Dim(int64_t{0}));
  // A var under a division by a symbol, or a product of vars: not affine.
  CHECK(!symbolic_affine_form(binary(ExprOp::FloorDiv, var(o0), s1, DType::I64)).has_value());
  CHECK(!symbolic_affine_form(mul(var(o0), var(o1))).has_value());
  // A var-free term that is no size expression (a select): not affine, never a throw.
  Expr sel = where(binary(ExprOp::Lt, s1, int_const(3), DType::Bool), s1, int_const(3));
  CHECK(!symbolic_affine_form(add(mul(var(o0), sel), var(i0))).has_value());
  // Terms cancel: o0 * s1 - o0 * s1 leaves no coefficient.
  auto g = symbolic_affine_form(binary(ExprOp::Sub, mul(var(o0), s1), mul(s1, var(o0)), DType::I64));
  CHECK(g.has_value() && g->coef.empty());
}

TEST(known_multiple_reads_the_form) {
  Dim s1 = Dim::of(sym(1), 5);
  CHECK(known_multiple(Dim(int64_t{768}) * s1, 8));
  CHECK(known_multiple(Dim(int64_t{768}) * s1 + Dim(int64_t{16}), 8));
  CHECK(!known_multiple(Dim(int64_t{768}) * s1 + Dim(int64_t{4}), 8));
  CHECK(!known_multiple(s1, 2));
  CHECK(!known_multiple(floordiv(Dim(int64_t{16}) * s1, Dim(int64_t{3})), 8));
  CHECK(known_multiple(Dim(int64_t{24}), 8) && !known_multiple(Dim(int64_t{20}), 8));
}

