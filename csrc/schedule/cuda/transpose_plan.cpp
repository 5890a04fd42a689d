#include "schedule/cuda/transpose_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/affine.h"
#include "schedule/cuda/vector_access.h"

namespace ember {

namespace {

constexpr int64_t kLineBytes = 128;  // a warp's coalesced access: one 128-byte line
constexpr int64_t kInt32Limit = int64_t{1} << 31;

using Sizes = std::map<int, Dim>;  // loop var id -> its extent

// The one loop var (of size > 1) with coefficient 1, or -1 when there is none or several.
int unit_var(const SymbolicAffine& f, const Sizes& size) {
  int found = -1;
  for (const auto& [v, c] : f.coef) {
    if (c != Dim(1) || size.at(v) == Dim(1)) continue;
    if (found >= 0) return -1;
    found = v;
  }
  return found;
}

// Whether a size expression is >= 0 at every value of its symbols, as its form shows:
// sums and products of symbols and non-negative constants (index coefficients and
// extents are made of tensor sizes).
bool known_nonnegative(const Expr& e) {
  switch (e->op) {
    case ExprOp::Const: return e->ival >= 0;
    case ExprOp::Sym: return true;
    case ExprOp::Add:
    case ExprOp::Mul: return known_nonnegative(e->args[0]) && known_nonnegative(e->args[1]);
    default: return false;
  }
}

bool known_nonnegative(const Dim& d) { return d.is_static() ? d.hint() >= 0 : known_nonnegative(d.expr()); }

// Whether the index stays inside [0, extent) over the whole loop space (at every value of
// the symbols).
bool in_bounds(const SymbolicAffine& f, const Sizes& size, const Dim& extent) {
  Dim lo = f.constant, hi = f.constant;
  for (const auto& [v, c] : f.coef) {
    const Dim span = c * (size.at(v) - Dim(1));
    if (known_nonnegative(c)) {
      hi += span;
    } else if (c.is_static()) {
      lo += span;
    } else {
      return false;  // a coefficient of unknown sign
    }
  }
  return known_nonnegative(lo) && known_nonnegative(extent - hi - Dim(1));
}

// Grows `side` (starting at its unit-stride var) by loop dims that both accesses see as
// continuing it: a dim whose stride in `a` is the side's extent so far, and whose stride
// in `b` is the last dim's stride in `b` times that dim's size.
void grow_side(TransposePlan::Side& side, const SymbolicAffine& a, const SymbolicAffine& b, const Sizes& size,
               const std::set<int>& taken) {
  for (bool grew = true; grew;) {
    grew = false;
    const int last = side.vars.back();
    for (const auto& [v, n] : size) {
      if (n == Dim(1) || taken.count(v) || std::count(side.vars.begin(), side.vars.end(), v)) continue;
      if (coef_of(a, v) != side.extent || coef_of(b, v) != coef_of(b, last) * size.at(last)) continue;
      side.vars.push_back(v);
      side.sizes.push_back(n);
      side.extent *= n;
      grew = true;
      break;
    }
  }
}

// A tile length along a side of `n` elements: about `elems` / `other` (whole 32-lane
// rows), at least a line of `line` elements, at most n; up to a quarter longer where
// that divides n (a [512, 512, 3, 3] weight made channels-last: 256 in place of 224,
// whose last tile along the 512 input channels was two-thirds empty).
int64_t fill(int64_t n, int64_t elems, int64_t other, int64_t line) {
  const int64_t t = std::min(n, std::max(line, elems / other / 32 * 32));
  for (int64_t longer = t; n % t && longer <= t + t / 4 && longer <= n; longer += 32)
    if (n % longer == 0) return longer;
  return t;
}

// Bytes of the C type a staged value of dtype t has in the kernel (CEmitter::c_type).
int64_t staged_bytes(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8:
    case DType::I8: return 1;
    case DType::I16: return 2;
    case DType::I64:
    case DType::F64: return 8;
    default: return 4;  // f32, i32, and f16/bf16 (staged as float)
  }
}

// Lanes of a phase's vector accesses (TransposePlan::load_lanes, store_lanes): the
// elements of a 16-byte word of `dtype`, when each of `indices` reads (or writes) groups
// of that many consecutive elements of the phase's order (`fast` side fastest) as
// consecutive, aligned elements; else 0. Each index must see the fast side as one dim of
// stride 1 and the slow side as one dim, with every other term a multiple of the lanes.
// With symbolic sizes each divisibility must hold at every size (known_multiple).
int phase_lanes(const std::vector<Expr>& indices, DType dtype, const TransposePlan::Side& fast,
                const TransposePlan::Side& slow, const Sizes& size) {
  const int lanes = dtype_size(dtype) <= 4 ? 16 / static_cast<int>(dtype_size(dtype)) : 0;
  if (lanes == 0 || vector_bytes(dtype, lanes) != 16 || indices.empty()) return 0;
  for (const Expr& index : indices) {
    auto f = index_form(index);
    if (!f || !known_multiple(f->constant, lanes)) return 0;
    const auto cf = side_coef(*f, fast), cs = side_coef(*f, slow);
    if (!cf || *cf != Dim(1) || !cs) return 0;
    for (const auto& [v, c] : f->coef) {
      const bool on_side = std::count(fast.vars.begin(), fast.vars.end(), v) || std::count(slow.vars.begin(), slow.vars.end(), v);
      if (!on_side && size.at(v) != Dim(1) && !known_multiple(c, lanes)) return 0;
    }
    // A group inside one run of the fast side, or the tile one run of memory.
    const bool in_run = fast.tile % lanes == 0 && known_multiple(fast.extent, lanes) && known_multiple(*cs, lanes);
    const bool one_run = fast.extent == Dim(fast.tile) && *cs == fast.extent &&
                         known_multiple(fast.extent * Dim(slow.tile), lanes) && known_multiple(fast.extent * slow.extent, lanes);
    if (!in_run && !one_run) return 0;
  }
  return lanes;
}

}  // namespace

TileLayout::TileLayout(const TransposePlan& t)
    : rows_along_store(t.store.tile <= t.load.tile),
      spread(t.load_lanes > 0 || t.store_lanes > 0),
      row((rows_along_store ? t.store.tile : t.load.tile) | 1),
      size(row * (rows_along_store ? t.load.tile : t.store.tile) * (spread ? 9 : 8) / 8 + (spread ? 1 : 0)) {}

std::string TileLayout::at(const std::string& l, const std::string& s) const {
  const std::string e = rows_along_store ? l + " * " + std::to_string(row) + " + " + s : s + " * " + std::to_string(row) + " + " + l;
  return spread ? "(" + e + ") * 9 / 8" : e;
}

std::optional<SymbolicAffine> index_form(const Expr& index) {
  if (auto f = affine_form(index)) {
    SymbolicAffine out;
    for (const auto& [v, c] : f->coef) out.coef.emplace(v, Dim(c));
    out.constant = f->constant;
    return out;
  }
  return symbolic_affine_form(index);
}

Dim coef_of(const SymbolicAffine& f, int var) {
  auto it = f.coef.find(var);
  return it == f.coef.end() ? Dim(0) : it->second;
}

std::optional<Dim> side_coef(const SymbolicAffine& f, const TransposePlan::Side& side) {
  const Dim c = coef_of(f, side.vars[0]);
  Dim stride = 1;
  for (size_t d = 0; d < side.vars.size(); ++d) {
    if (coef_of(f, side.vars[d]) != c * stride) return std::nullopt;
    stride *= side.sizes[d];
  }
  return c;
}

Dim TransposePlan::tiles() const {
  Dim rest = 1;
  for (const Dim& n : rest_sizes) rest *= n;
  auto count = [](const Side& s) { return floordiv(s.extent + Dim(s.tile - 1), Dim(s.tile)); };
  return rest * count(load) * count(store);
}

uint32_t TransposePlan::grid() const { return static_cast<uint32_t>(std::min(kMaxTransposeGrid, tiles().hint())); }

std::optional<TransposePlan> plan_transpose(const Program& p, const Kernel& k, const std::vector<bool>& in_memory) {
  if (k.stages.size() != 1) return std::nullopt;
  const Stage& stage = k.stages[0];
  Sizes size;
  std::vector<int> order;  // loop order, outermost first
  for (size_t d = 0; d < k.outer.size(); ++d) order.push_back(outer_var(static_cast<int>(d)));
  for (size_t d = 0; d < stage.inner.size(); ++d) order.push_back(inner_var(static_cast<int>(d)));
  Dim total = 1;
  bool symbolic = false;
  for (size_t d = 0; d < order.size(); ++d) {
    const Dim& n = d < k.outer.size() ? k.outer[d] : stage.inner[d - k.outer.size()];
    symbolic |= !n.is_static();
    size[order[d]] = n;
    total *= n;
  }
  if (total.hint() == 0) return std::nullopt;

  // The store: one affine layout for every stored buffer (constants may differ).
  std::optional<SymbolicAffine> store;
  std::set<int> own;
  DType store_dtype = DType::F32;
  for (const auto& item : stage.items) {
    const ComputedBuffer& c = p.computed[item.computed];
    if (c.is_reduction || item.is_scan) return std::nullopt;
    own.insert(c.buffer);
    if (!in_memory[c.buffer]) continue;
    auto f = index_form(item.store_index);
    if (!f) return std::nullopt;
    for (auto it = f->coef.begin(); it != f->coef.end();) it = size.at(it->first) == Dim(1) ? f->coef.erase(it) : std::next(it);
    if (store && store->coef != f->coef) return std::nullopt;
    store = f;
    store_dtype = p.buffers[c.buffer].dtype;
  }
  if (!store) return std::nullopt;
  const int s_var = unit_var(*store, size);
  if (s_var < 0) return std::nullopt;

  // Loads that a tile can stage: one index per buffer, affine, in bounds, unit-stride
  // along a dim other than S and varying along S.
  std::map<int, Expr> index;
  std::set<int> mixed;
  for (const auto& item : stage.items)
    walk_loads(item.value, [&](const Expr& e) {
      auto [it, fresh] = index.emplace(static_cast<int>(e->ival), e->args[0]);
      if (!fresh && !same_index(it->second, e->args[0])) mixed.insert(static_cast<int>(e->ival));
    });
  struct Candidate {
    int buffer, unit;
    int64_t extent;  // at the hints: it orders the candidates
    SymbolicAffine form;
  };
  std::vector<Candidate> candidates;
  for (const auto& [b, idx] : index) {
    if (mixed.count(b) || own.count(b)) continue;
    auto f = index_form(idx);
    if (!f) continue;
    const Dim extent = p.buffers[b].extent();
    const int unit = unit_var(*f, size);
    if (unit < 0 || unit == s_var || coef_of(*f, s_var) == Dim(0) || !in_bounds(*f, size, extent)) continue;
    candidates.push_back({b, unit, extent.hint(), *f});
  }
  if (candidates.empty()) return std::nullopt;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.extent > b.extent; });
  const Candidate& first = candidates.front();

  TransposePlan t;
  t.symbolic = symbolic;
  t.load = {{first.unit}, {size.at(first.unit)}, size.at(first.unit), 1};
  grow_side(t.load, first.form, *store, size, {s_var});
  t.store = {{s_var}, {size.at(s_var)}, size.at(s_var), 1};
  grow_side(t.store, *store, first.form, size, std::set<int>(t.load.vars.begin(), t.load.vars.end()));
  for (int v : order)
    if (!std::count(t.load.vars.begin(), t.load.vars.end(), v) && !std::count(t.store.vars.begin(), t.store.vars.end(), v)) {
      t.rest_vars.push_back(v);
      t.rest_sizes.push_back(size.at(v));
    }

  // Tile lengths. A side no longer than two lines is taken whole (3 channels: a 3 x 672
  // tile); the other side fills the tile up to the elementwise shape's elements per block
  // (8 or 4 a thread); two long sides get a line each way, at least. A symbolic side is
  // never whole, and counts as at least a line long (its hint may be short).
  const int64_t load_line = kLineBytes / dtype_size(p.buffers[first.buffer].dtype);
  const int64_t store_line = kLineBytes / dtype_size(store_dtype);
  const bool narrow = dtype_size(p.buffers[first.buffer].dtype) <= 2 && dtype_size(store_dtype) <= 2;
  const int64_t elems = int64_t{kTransposeThreads} * (narrow ? 8 : 4);
  const int64_t load_n = t.load.extent.is_static() ? t.load.extent.hint() : std::max(t.load.extent.hint(), load_line);
  const int64_t store_n = t.store.extent.is_static() ? t.store.extent.hint() : std::max(t.store.extent.hint(), store_line);
  if (t.store.extent.is_static() && store_n <= 2 * store_line) {
    t.store.tile = store_n;
    t.load.tile = fill(load_n, elems, t.store.tile, load_line);
  } else if (t.load.extent.is_static() && load_n <= 2 * load_line) {
    t.load.tile = load_n;
    t.store.tile = fill(store_n, elems, t.load.tile, store_line);
  } else {
    t.store.tile = store_line;
    t.load.tile = fill(load_n, elems, t.store.tile, load_line);
  }
  if (t.load.tile * t.store.tile < kTransposeThreads) return std::nullopt;  // too small to pay for a barrier

  const TileLayout layout(t);
  int64_t shared = 0;
  for (const Candidate& c : candidates) {
    if (c.unit != first.unit) continue;
    const int64_t bytes = layout.size * staged_bytes(p.buffers[c.buffer].dtype);
    if (shared + bytes > kTransposeSharedBytes) continue;
    shared += bytes;
    t.staged.push_back(c.buffer);
  }
  if (t.staged.empty()) return std::nullopt;

  std::vector<Expr> staged_indices, store_indices;
  std::set<int64_t> staged_sizes, store_sizes;
  for (int b : t.staged) {
    staged_indices.push_back(index.at(b));
    staged_sizes.insert(dtype_size(p.buffers[b].dtype));
  }
  for (const auto& item : stage.items) {
    const int b = p.computed[item.computed].buffer;
    if (!in_memory[b]) continue;
    store_indices.push_back(item.store_index);
    store_sizes.insert(dtype_size(p.buffers[b].dtype));
  }
  if (staged_sizes.size() == 1)
    t.load_lanes = phase_lanes(staged_indices, p.buffers[t.staged[0]].dtype, t.load, t.store, size);
  if (store_sizes.size() == 1) t.store_lanes = phase_lanes(store_indices, store_dtype, t.store, t.load, size);
  // A block's last tile index reaches tiles + grid; a coordinate, extent + tile. Sizes
  // that grow at run time may reach anything.
  t.wide = t.symbolic || t.tiles().hint() + kMaxTransposeGrid >= kInt32Limit ||
           t.load.extent.hint() + t.load.tile >= kInt32Limit || t.store.extent.hint() + t.store.tile >= kInt32Limit;
  return t;
}

}  // namespace ember
