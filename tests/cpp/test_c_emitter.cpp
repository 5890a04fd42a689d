// CEmitter: where statements are placed.
#include <string>
#include <vector>

#include "check.h"
#include "codegen/c_emitter.h"
#include "ir/expr.h"

using namespace ember;

namespace {
bool any_mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}
}  // namespace

// Printers emit temporary expressions (built, printed, freed), and CEmitter caches each
// node's scope level by address. Each round here prints a load at a constant index
// (function level) and a value over both loop vars, which must land in the inner scope.
// (The cache once kept only addresses: a freed node's level went to a new node at the
// same address. ResNet-50's layer-3 weight transpose printed a statement over the inner
// loop's var in the function body; reuse depends on the allocator, so this checks the
// placement, not the reuse.)
TEST(emitter_places_temporaries_by_their_own_vars) {
  CEmitter em({{0, CEmitter::BufferRef{"b0", DType::I64, 100}}});
  em.open_scope({{1, "i"}});
  em.open_scope({{2, "j"}});
  for (int round = 0; round < 64; ++round) {
    em.emit(binary(ExprOp::Mul, load(0, int_const(round % 50), DType::I64), int_const(round + 3), DType::I64));
    em.emit(binary(ExprOp::Add, var(2), binary(ExprOp::Mul, var(1), int_const(round + 1000), DType::I64), DType::I64));
  }
  const std::vector<std::string> inner = em.close_scope();
  const std::vector<std::string> outer = em.close_scope();
  CHECK(!any_mentions(outer, "j + "));
  CHECK(!any_mentions(em.function_lines(), "j + "));
  CHECK(!any_mentions(em.function_lines(), "i * "));
  CHECK(any_mentions(outer, "i * "));
  CHECK(any_mentions(em.function_lines(), "b0["));
  CHECK(any_mentions(inner, "j + "));
}
