#include "schedule/cuda/lane_invariant.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace ember {

namespace {

constexpr int64_t kMinCost = 2;  // a register per lane buys back at least two ops an element

int64_t op_cost(ExprOp op) {
  switch (op) {
    case ExprOp::Const: case ExprOp::Var: case ExprOp::Sym: case ExprOp::Load: case ExprOp::Cast:
      return 0;
    case ExprOp::Sqrt: case ExprOp::Rsqrt: case ExprOp::Div: case ExprOp::Reciprocal: case ExprOp::FloorDiv:
    case ExprOp::TruncDiv: case ExprOp::Mod: case ExprOp::Fmod:
      return 8;
    default:
      return is_transcendental(op) ? 8 : 1;
  }
}

// A float product, seen through negations and casts (what an fma can absorb).
const Expr* product_under(const Expr& e) {
  const Expr* n = &e;
  while (((*n)->op == ExprOp::Neg || (*n)->op == ExprOp::Cast) && is_float((*n)->dtype)) n = &(*n)->args[0];
  return (*n)->op == ExprOp::Mul && is_float((*n)->dtype) ? n : nullptr;
}

class Finder {
 public:
  Finder(int v, const std::function<bool(int)>& readable) : v_(v), readable_(readable) {}

  struct Kind {
    bool invariant = true;  // depends on nothing but v
    bool uses_v = false;
  };

  Kind kind(const Expr& e) {
    auto it = kind_.find(e.get());
    if (it != kind_.end()) return it->second;
    Kind k;
    if (e->op == ExprOp::Var) {
      k.invariant = k.uses_v = e->ival == v_;
    } else {
      for (const auto& a : e->args) {
        Kind ak = kind(a);
        k.invariant &= ak.invariant;
        k.uses_v |= ak.uses_v;
      }
      if (e->op == ExprOp::Load) k.invariant &= readable_(static_cast<int>(e->ival));
    }
    kind_[e.get()] = k;
    return k;
  }

  // Records the largest invariant subexpressions of e that use v (`unguarded`: met
  // outside every Where branch at least once), and the products that sums take.
  void walk(const Expr& e, bool guarded) {
    Kind k = kind(e);
    if (k.invariant) {
      if (!k.uses_v) return;
      auto [it, fresh] = index_.emplace(e, found_.size());
      if (fresh) found_.push_back({e, false});
      found_[it->second].second |= !guarded;
      return;
    }
    if (!seen_.insert({e.get(), guarded}).second) return;
    note_fused_products(e);
    for (size_t i = 0; i < e->args.size(); ++i) walk(e->args[i], guarded || (e->op == ExprOp::Where && i > 0));
  }

  void note_fused_products(const Expr& e) {
    if ((e->op != ExprOp::Add && e->op != ExprOp::Sub) || !is_float(e->dtype)) return;
    for (const auto& a : e->args)
      if (const Expr* p = product_under(a)) fused_.insert(*p);
  }

  // Whether e's subtree holds a product that a sum takes (inside it or outside).
  bool holds_fused_product(const Expr& e) {
    auto it = holds_.find(e.get());
    if (it != holds_.end()) return it->second;
    note_fused_products(e);
    bool h = false;
    for (const auto& a : e->args) h |= holds_fused_product(a);
    h |= fused_.count(e) > 0;
    holds_[e.get()] = h;
    return h;
  }

  int64_t cost(const Expr& e, std::unordered_set<const ExprNode*>& counted) {
    if (!counted.insert(e.get()).second || e->op == ExprOp::Load) return 0;  // index arithmetic: not counted
    int64_t c = op_cost(e->op);
    for (const auto& a : e->args) c += cost(a, counted);
    return c;
  }

  std::vector<InvariantValue> result() {
    // Products inside candidates that sums inside them take count as well: walk them all first.
    for (const auto& [e, unguarded] : found_) holds_fused_product(e);
    holds_.clear();
    std::vector<InvariantValue> out;
    for (const auto& [e, unguarded] : found_) {
      if (!unguarded || holds_fused_product(e)) continue;
      std::unordered_set<const ExprNode*> counted;
      int64_t c = cost(e, counted);
      if (c >= kMinCost) out.push_back({e, c});
    }
    std::stable_sort(out.begin(), out.end(), [](const InvariantValue& a, const InvariantValue& b) { return a.cost > b.cost; });
    return out;
  }

 private:
  struct SeenHash {
    size_t operator()(const std::pair<const ExprNode*, bool>& p) const {
      return std::hash<const void*>()(p.first) * 2 + p.second;
    }
  };
  int v_;
  const std::function<bool(int)>& readable_;
  std::unordered_map<const ExprNode*, Kind> kind_;
  std::unordered_set<std::pair<const ExprNode*, bool>, SeenHash> seen_;
  std::unordered_map<Expr, size_t, ExprHash, ExprEqual> index_;
  std::vector<std::pair<Expr, bool>> found_;  // candidate, met unguarded
  std::unordered_set<Expr, ExprHash, ExprEqual> fused_;  // structurally: the emitter's CSE is
  std::unordered_map<const ExprNode*, bool> holds_;
};

}  // namespace

std::vector<InvariantValue> innermost_invariants(const std::vector<Expr>& roots, int v,
                                                 const std::function<bool(int)>& readable) {
  Finder f(v, readable);
  for (const auto& r : roots) f.walk(r, false);
  return f.result();
}

bool depends_only_on(const Expr& e, int v) {
  if (e->op == ExprOp::Load) return false;
  if (e->op == ExprOp::Var) return e->ival == v;
  for (const auto& a : e->args)
    if (!depends_only_on(a, v)) return false;
  return true;
}

}  // namespace ember
