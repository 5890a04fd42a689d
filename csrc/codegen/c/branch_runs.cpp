#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/c/kernel_printer.h"
#include "codegen/stage_items.h"

namespace ember {

// A pointwise stage's innermost loop, split into runs over which every Where whose
// condition is an integer comparison linear in the loop var takes one arm, each run a
// loop of its own that reads only its arm's operands. A cat along the innermost dim
// (and a channel shuffle, whose condition is fixed for the row) read every operand for
// each element, through indices clamped into range, and selected one: n reads for one.
// A comparison cmp(a, b) with a - b = c * i + f0 changes at most once along the loop, at a
// point computed from its value at the run's start (ember_run_end, c_prelude.cpp).

namespace {

// Loop bodies a stage may print: kMaxVersions for any decision tree (three independent
// conditions), kMaxChainVersions for a chain, where each condition fixes one arm to a leaf:
// a cat's operands, one loop each (DenseNet-121's cats have up to 25 operands; with the cap
// at 8 they read all 25 for every element: 1 ms a kernel against eager's 0.1 ms).
constexpr size_t kMaxVersions = 8;
constexpr size_t kMaxChainVersions = 64;

bool has_load(const Expr& e) {
  bool found = false;
  walk_loads(e, [&](const Expr&) { found = true; });
  return found;
}

bool is_zero(const Expr& c) { return c->is_const() && (is_float(c->dtype) ? c->fval == 0 : c->ival == 0); }

// A Where's condition without the round trips through a number a bool mask takes
// (`(bool)(float)(j < i)`, `(float)(j < i) != 0`: a mask made a number and read back).
Expr peeled(Expr c) {
  for (;;) {
    const bool to_number = !c->args.empty() && c->args[0]->op == ExprOp::Cast && c->args[0]->args[0]->dtype == DType::Bool;
    if (c->op == ExprOp::Ne && to_number && is_zero(c->args[1])) c = c->args[0]->args[0];
    else if (c->op == ExprOp::Cast && c->dtype == DType::Bool && to_number) c = c->args[0]->args[0];
    else if (c->op == ExprOp::Cast && c->args[0]->dtype == DType::Bool) c = c->args[0];
    else return c;
  }
}

// The first Where (in print order) whose condition the runs can fix, or null.
Expr first_run_condition(const Expr& e, int v) {
  if (e->op == ExprOp::Where) {
    const Expr c = peeled(e->args[0]);
    const bool cmp = c->op == ExprOp::Lt || c->op == ExprOp::Le || c->op == ExprOp::Gt || c->op == ExprOp::Ge;
    if (cmp && is_int(c->args[0]->dtype) && is_int(c->args[1]->dtype) && !has_load(c) &&
        coefficient(binary(ExprOp::Sub, c->args[0], c->args[1], DType::I64), v))
      return c;
  }
  for (const auto& a : e->args)
    if (Expr c = first_run_condition(a, v)) return c;
  return nullptr;
}

// e with every Where on `cond` replaced by the arm `taken` picks.
Expr fix_condition(const Expr& e, const Expr& cond, bool taken, std::unordered_map<const ExprNode*, Expr>& memo) {
  auto it = memo.find(e.get());
  if (it != memo.end()) return it->second;
  Expr r = e;
  if (e->op == ExprOp::Where && equal(peeled(e->args[0]), cond)) {
    r = fix_condition(e->args[taken ? 1 : 2], cond, taken, memo);
  } else if (!e->args.empty()) {
    std::vector<Expr> args;
    bool changed = false;
    for (const auto& a : e->args) {
      args.push_back(fix_condition(a, cond, taken, memo));
      changed |= args.back() != a;
    }
    if (changed) r = node_of(e->op, e->dtype, e->ival, std::move(args));
  }
  memo.emplace(e.get(), r);
  return r;
}

// The decision tree over the run conditions: a leaf is a stage whose items have none left.
struct RunTree {
  Expr cond;                       // null at a leaf
  std::unique_ptr<RunTree> taken, other;
  Stage stage;                     // at a leaf
};

std::unique_ptr<RunTree> build_tree(const Stage& stage, int v, size_t& leaves) {
  auto t = std::make_unique<RunTree>();
  for (const auto& item : stage.items)
    if ((t->cond = first_run_condition(item.value, v))) break;
  if (!t->cond) {
    t->stage = stage;
    ++leaves;
    return t;
  }
  for (bool taken : {true, false}) {
    Stage fixed = stage;
    std::unordered_map<const ExprNode*, Expr> memo;
    for (auto& item : fixed.items) item.value = fix_condition(item.value, t->cond, taken, memo);
    (taken ? t->taken : t->other) = build_tree(fixed, v, leaves);
    if (leaves > kMaxChainVersions) return nullptr;
    if (!(taken ? t->taken : t->other)) return nullptr;
  }
  return t;
}

// Whether every condition of the tree has a leaf for one of its arms (a cat's chain).
bool is_chain(const RunTree& t) {
  if (!t.cond) return true;
  return (!t.taken->cond || !t.other->cond) && is_chain(*t.taken) && is_chain(*t.other);
}

void conditions(const RunTree& t, std::vector<Expr>& out) {
  if (!t.cond) return;
  bool seen = false;
  for (const auto& c : out) seen |= equal(c, t.cond);
  if (!seen) out.push_back(t.cond);
  conditions(*t.taken, out);
  conditions(*t.other, out);
}

}  // namespace

bool KernelPrinter::print_branch_runs(int st, int d, bool simd) {
  const Stage& stage = k_.stages[st];
  for (const auto& item : stage.items)
    if (item.is_scan || p_.computed[item.computed].is_reduction) return false;
  const int v = inner_var(d);
  size_t leaves = 0;
  std::unique_ptr<RunTree> tree = build_tree(stage, v, leaves);
  if (!tree || !tree->cond || (leaves > kMaxVersions && !is_chain(*tree))) return false;
  std::vector<Expr> conds;
  conditions(*tree, conds);

  const std::string iv = "i" + std::to_string(d), n = dim_text(stage.inner[d]);
  // Conditions that move along the loop split it into runs; the run's start is a var
  // of its own (the run scope's), so that their values there print before the runs' loops.
  std::vector<std::pair<Expr, int64_t>> moving;  // a - b and its slope, canonical (below)
  for (const auto& c : conds) {
    Expr f = binary(ExprOp::Sub, cast(c->args[0], DType::I64), cast(c->args[1], DType::I64), DType::I64);
    const int64_t slope = *coefficient(binary(ExprOp::Sub, c->args[0], c->args[1], DType::I64), v);  // as first_run_condition
    if (slope == 0) continue;
    // As h < 0: Lt f < 0; Le f - 1 < 0; Gt -f < 0; Ge -f - 1 < 0.
    const bool neg = c->op == ExprOp::Gt || c->op == ExprOp::Ge;
    if (neg) f = binary(ExprOp::Sub, const_of(0, DType::I64), f, DType::I64);
    if (c->op == ExprOp::Le || c->op == ExprOp::Ge) f = add(f, -1);
    moving.push_back({f, neg ? -slope : slope});
  }
  const int run_var = inner_var(d) + (1 << 20);  // the run's start: no kernel has that many inner dims
  const std::string run = "r" + std::to_string(d), run_end = run + "e";
  std::unordered_map<int, Expr> at_start = {{v, var(run_var)}};
  std::string lo = "0", hi = n;
  // The branches print in a scope of their own (the run loop's body, or a plain block):
  // what their loops hoist to the row lands before it, not inside one branch.
  em_->open_scope(moving.empty() ? std::vector<std::pair<int, std::string>>{} : std::vector<std::pair<int, std::string>>{{run_var, run}});
  if (!moving.empty()) {
    std::string end = n;
    for (const auto& [f, slope] : moving)
      end = "ember_run_end(" + run + ", " + end + ", " + em_->emit(substitute(f, at_start)) + ", " +
            std::to_string(slope) + "LL)";
    em_->line(run_end + " = " + end + ";");
    lo = run;
    hi = run_end;
  }
  // Every condition's value (at the run's start) before the branches, which share them.
  for (const auto& c : conds) em_->emit(moving.empty() ? c : substitute(c, at_start));
  // One loop per leaf: its stage's items, with nothing of the other arms left.
  std::function<void(const RunTree&)> print = [&](const RunTree& t) {
    if (t.cond) {
      const std::string c = em_->emit(moving.empty() ? t.cond : substitute(t.cond, at_start));
      em_->line("if (" + c + ") {");
      {
        em_->open_scope({});
        print(*t.taken);
        for (const auto& l : em_->close_scope()) em_->line("  " + l);
      }
      em_->line("} else {");
      {
        em_->open_scope({});
        print(*t.other);
        for (const auto& l : em_->close_scope()) em_->line("  " + l);
      }
      em_->line("}");
      return;
    }
    em_->open_scope({{v, iv}});
    if (d == 0) bind_vector_locals();
    for (const auto& inv : row_invariant_names_[st])
      if (inv.dim == d) em_->bind_value(inv.expr, inv.name);
    for (const auto& rb : row_buffer_loads_[st]) em_->bind_value(rb.expr, rb.ref);
    std::vector<Acc> none(t.stage.items.size());
    print_stage_items(*em_, {p_, t.stage, m_.in_memory, none, [&] { return flat_index(t.stage); }, ""});
    for (const auto& rb : row_buffer_stores_[st]) em_->line(rb.ref + " = " + em_->emit(rb.expr) + ";");
    std::vector<std::string> body = em_->close_scope();
    if (simd) em_->line("#pragma omp simd");
    em_->line("for (int64_t " + iv + " = " + lo + "; " + iv + " < " + hi + "; ++" + iv + ") {");
    for (const auto& l : body) em_->line("  " + l);
    em_->line("}");
  };
  print(*tree);
  std::vector<std::string> body = em_->close_scope();
  if (moving.empty()) {
    for (const auto& l : body) em_->line(l);
  } else {
    em_->line("for (int64_t " + run + " = 0, " + run_end + " = 0; " + run + " < " + n + "; " + run + " = " + run_end + ") {");
    for (const auto& l : body) em_->line("  " + l);
    em_->line("}");
  }
  return true;
}

}  // namespace ember
