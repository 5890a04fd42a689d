#include "codegen/cuda_transpose.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/cuda_vector_access.h"
#include "ir/affine.h"

namespace ember {

namespace {

constexpr int64_t kLineBytes = 128;  // a warp's coalesced access: one 128-byte line
constexpr int64_t kInt32Limit = int64_t{1} << 31;

void walk_loads(const Expr& e, const std::function<void(const Expr&)>& f) {
  if (e->op == ExprOp::Load) f(e);
  for (const auto& a : e->args) walk_loads(a, f);
}

int64_t coef_of(const AffineForm& f, int v) {
  auto it = f.coef.find(v);
  return it == f.coef.end() ? 0 : it->second;
}

// The one loop var (of size > 1) with coefficient 1, or -1 when there is none or several.
int unit_var(const AffineForm& f, const std::map<int, int64_t>& size) {
  int found = -1;
  for (const auto& [v, c] : f.coef) {
    if (c != 1 || size.at(v) == 1) continue;
    if (found >= 0) return -1;
    found = v;
  }
  return found;
}

// Whether the index stays inside [0, extent) over the whole loop space.
bool in_bounds(const AffineForm& f, const std::map<int, int64_t>& size, int64_t extent) {
  int64_t lo = f.constant, hi = f.constant;
  for (const auto& [v, c] : f.coef) (c < 0 ? lo : hi) += c * (size.at(v) - 1);
  return lo >= 0 && hi < extent;
}

// Grows `side` (starting at its unit-stride var) by loop dims that both accesses see as
// continuing it: a dim whose stride in `a` is the side's extent so far, and whose stride
// in `b` is the last dim's stride in `b` times that dim's size.
void grow_side(TransposePlan::Side& side, const AffineForm& a, const AffineForm& b, const std::map<int, int64_t>& size,
               const std::set<int>& taken) {
  for (bool grew = true; grew;) {
    grew = false;
    const int last = side.vars.back();
    for (const auto& [v, n] : size) {
      if (n == 1 || taken.count(v) || std::count(side.vars.begin(), side.vars.end(), v)) continue;
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

std::string var_name(int v) {
  return v >= kInnerVarBase ? "i" + std::to_string(v - kInnerVarBase) : "o" + std::to_string(v - kOuterVarBase);
}

// `const int64_t <var> = ...;` for each var of `vars` (innermost first), splitting `flat`
// (less than the product of `sizes`).
std::vector<std::string> coordinates(const std::string& flat, const std::vector<int>& vars,
                                     const std::vector<int64_t>& sizes) {
  std::vector<std::string> lines;
  int64_t stride = 1;
  for (size_t d = 0; d < vars.size(); ++d) {
    std::string q = stride == 1 ? flat : "(" + flat + " / " + std::to_string(stride) + ")";
    if (d + 1 < vars.size()) q += " % " + std::to_string(sizes[d]);
    lines.push_back("const int64_t " + var_name(vars[d]) + " = (int64_t)(" + q + ");");
    stride *= sizes[d];
  }
  return lines;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Var ids for a tile element's flat coordinates along each side (named lg and sg).
constexpr int kLoadSideVar = kInnerVarBase + (1 << 21);
constexpr int kStoreSideVar = kLoadSideVar + 1;

// The coefficient c of `side` in `f` when f sees the side as one dim (each of the side's
// dims at c times the product of the sizes before it), else nullopt.
std::optional<int64_t> side_coef(const AffineForm& f, const TransposePlan::Side& side) {
  const int64_t c = coef_of(f, side.vars[0]);
  int64_t stride = 1;
  for (size_t d = 0; d < side.vars.size(); ++d) {
    if (coef_of(f, side.vars[d]) != c * stride) return std::nullopt;
    stride *= side.sizes[d];
  }
  return c;
}

// `index` with each side's dims folded into that side's flat coordinate, when it sees
// the side as one dim (sum of coef * var over the side = coef of the first * flat):
// const + rest terms + c_S * sg + c_L * lg, with no division or modulo per element.
// Otherwise `index` unchanged (it reads the coordinates).
Expr side_linear(const Expr& index, const TransposePlan& t) {
  auto f = affine_form(index);
  if (!f) return index;
  const auto cl = side_coef(*f, t.load), cs = side_coef(*f, t.store);
  if (!cl || !cs) return index;
  Expr out = int_const(0);
  for (int v : t.rest_vars)
    if (int64_t c = coef_of(*f, v)) out = add(out, mul(var(v), c));
  out = add(out, f->constant);
  out = add(out, mul(var(kStoreSideVar), *cs));
  return add(out, mul(var(kLoadSideVar), *cl));
}

// Element (l, s) of a staged tile: rows along the tile's shorter side, padded to an odd
// number of words, so that both phases' warps touch distinct banks. With vector
// accesses, a thread's group is 8 (or 4) consecutive elements of its phase's order, and
// 32 threads 8 elements apart would share 4 banks: one more word every 8 (`spread`)
// puts them 9 apart.
struct TileLayout {
  bool rows_along_store;  // element at l * row + s (else s * row + l)
  bool spread;
  int64_t row, size;
  explicit TileLayout(const TransposePlan& t)
      : rows_along_store(t.store.tile <= t.load.tile),
        spread(t.load_lanes > 0 || t.store_lanes > 0),
        row((rows_along_store ? t.store.tile : t.load.tile) | 1),
        size(row * (rows_along_store ? t.load.tile : t.store.tile) * (spread ? 9 : 8) / 8 + (spread ? 1 : 0)) {}
  std::string at(const std::string& l, const std::string& s) const {
    const std::string e = rows_along_store ? l + " * " + std::to_string(row) + " + " + s : s + " * " + std::to_string(row) + " + " + l;
    return spread ? "(" + e + ") * 9 / 8" : e;
  }
};

// Lanes of a phase's vector accesses (TransposePlan::load_lanes, store_lanes): the
// elements of a 16-byte word of `dtype`, when each of `indices` reads (or writes) groups
// of that many consecutive elements of the phase's order (`fast` side fastest) as
// consecutive, aligned elements; else 0. Each index must see the fast side as one dim of
// stride 1 and the slow side as one dim, with every other term a multiple of the lanes.
int phase_lanes(const std::vector<Expr>& indices, DType dtype, const TransposePlan::Side& fast,
                const TransposePlan::Side& slow, const std::map<int, int64_t>& size) {
  const int lanes = dtype_size(dtype) <= 4 ? 16 / static_cast<int>(dtype_size(dtype)) : 0;
  if (lanes == 0 || vector_bytes(dtype, lanes) != 16 || indices.empty()) return 0;
  for (const Expr& index : indices) {
    auto f = affine_form(index);
    if (!f || f->constant % lanes) return 0;
    const auto cf = side_coef(*f, fast), cs = side_coef(*f, slow);
    if (cf != 1 || !cs) return 0;
    for (const auto& [v, c] : f->coef) {
      const bool on_side = std::count(fast.vars.begin(), fast.vars.end(), v) || std::count(slow.vars.begin(), slow.vars.end(), v);
      if (!on_side && size.at(v) > 1 && c % lanes) return 0;
    }
    // A group inside one run of the fast side, or the tile one run of memory.
    const bool in_run = fast.tile % lanes == 0 && fast.extent % lanes == 0 && *cs % lanes == 0;
    const bool one_run = fast.tile == fast.extent && *cs == fast.extent && fast.extent * slow.tile % lanes == 0 &&
                         fast.extent * slow.extent % lanes == 0;
    if (!in_run && !one_run) return 0;
  }
  return lanes;
}

}  // namespace

int64_t TransposePlan::tiles() const {
  int64_t rest = 1;
  for (int64_t n : rest_sizes) rest *= n;
  return rest * ceil_div(load.extent, load.tile) * ceil_div(store.extent, store.tile);
}

uint32_t TransposePlan::grid() const { return static_cast<uint32_t>(std::min(kMaxTransposeGrid, tiles())); }

std::optional<TransposePlan> plan_transpose(const Program& p, const Kernel& k, const std::vector<bool>& in_memory) {
  if (k.stages.size() != 1) return std::nullopt;
  const Stage& stage = k.stages[0];
  std::map<int, int64_t> size;
  std::vector<int> order;  // loop order, outermost first
  for (size_t d = 0; d < k.outer.size(); ++d) order.push_back(outer_var(static_cast<int>(d)));
  for (size_t d = 0; d < stage.inner.size(); ++d) order.push_back(inner_var(static_cast<int>(d)));
  int64_t total = 1;
  for (size_t d = 0; d < order.size(); ++d) {
    const Dim& n = d < k.outer.size() ? k.outer[d] : stage.inner[d - k.outer.size()];
    if (!n.is_static()) return std::nullopt;
    size[order[d]] = n.hint();
    total *= n.hint();
  }
  if (total == 0) return std::nullopt;

  // The store: one affine layout for every stored buffer (constants may differ).
  std::optional<AffineForm> store;
  std::set<int> own;
  DType store_dtype = DType::F32;
  for (const auto& item : stage.items) {
    const ComputedBuffer& c = p.computed[item.computed];
    if (c.is_reduction || item.is_scan) return std::nullopt;
    own.insert(c.buffer);
    if (!in_memory[c.buffer]) continue;
    auto f = affine_form(item.store_index);
    if (!f) return std::nullopt;
    for (auto it = f->coef.begin(); it != f->coef.end();) it = size.at(it->first) == 1 ? f->coef.erase(it) : std::next(it);
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
    int64_t extent;
    AffineForm form;
  };
  std::vector<Candidate> candidates;
  for (const auto& [b, idx] : index) {
    if (mixed.count(b) || own.count(b)) continue;
    auto f = affine_form(idx);
    if (!f) continue;
    const int64_t extent = p.buffers[b].extent().hint();
    const int unit = unit_var(*f, size);
    if (unit < 0 || unit == s_var || coef_of(*f, s_var) == 0 || !in_bounds(*f, size, extent)) continue;
    candidates.push_back({b, unit, extent, *f});
  }
  if (candidates.empty()) return std::nullopt;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.extent > b.extent; });
  const Candidate& first = candidates.front();

  TransposePlan t;
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
  // (8 or 4 a thread); two long sides get a line each way, at least.
  const int64_t load_line = kLineBytes / dtype_size(p.buffers[first.buffer].dtype);
  const int64_t store_line = kLineBytes / dtype_size(store_dtype);
  const bool narrow = dtype_size(p.buffers[first.buffer].dtype) <= 2 && dtype_size(store_dtype) <= 2;
  const int64_t elems = int64_t{kTransposeThreads} * (narrow ? 8 : 4);
  if (t.store.extent <= 2 * store_line) {
    t.store.tile = t.store.extent;
    t.load.tile = fill(t.load.extent, elems, t.store.tile, load_line);
  } else if (t.load.extent <= 2 * load_line) {
    t.load.tile = t.load.extent;
    t.store.tile = fill(t.store.extent, elems, t.load.tile, store_line);
  } else {
    t.store.tile = store_line;
    t.load.tile = fill(t.load.extent, elems, t.store.tile, load_line);
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
  // A block's last tile index reaches tiles + grid; a coordinate, extent + tile.
  t.wide = t.tiles() + kMaxTransposeGrid >= kInt32Limit || t.load.extent + t.load.tile >= kInt32Limit ||
           t.store.extent + t.store.tile >= kInt32Limit;
  return t;
}

std::vector<std::string> transpose_body(const TransposePlan& t, const Program& p, const Kernel& k,
                                        const std::vector<bool>& in_memory, CEmitter& em) {
  const Stage& stage = k.stages[0];
  const std::string I = t.wide ? "int64_t" : "int";
  const TileLayout layout(t);
  const int64_t load_tiles = ceil_div(t.load.extent, t.load.tile), store_tiles = ceil_div(t.store.extent, t.store.tile);
  const int64_t elems = t.load.tile * t.store.tile;
  const std::string TL = std::to_string(t.load.tile), TS = std::to_string(t.store.tile);
  const std::string threads = std::to_string(kTransposeThreads);
  std::map<int, Expr> staged_load;
  for (const auto& item : stage.items)
    walk_loads(item.value, [&](const Expr& e) {
      if (std::count(t.staged.begin(), t.staged.end(), e->ival)) staged_load.emplace(static_cast<int>(e->ival), e);
    });
  auto shared_name = [](int b) { return "sh" + std::to_string(b); };

  std::vector<std::pair<int, std::string>> side_vars = {{kLoadSideVar, "lg"}, {kStoreSideVar, "sg"}};
  for (int v : t.load.vars) side_vars.push_back({v, var_name(v)});
  for (int v : t.store.vars) side_vars.push_back({v, var_name(v)});
  // The element's coordinates, in the current scope.
  auto coordinate_lines = [&] {
    for (const auto& l : coordinates("lg", t.load.vars, t.load.sizes)) em.line(l);
    for (const auto& l : coordinates("sg", t.store.vars, t.store.sizes)) em.line(l);
  };
  // One phase's loop over the tile, `lanes` elements a thread per step (1: scalar). Group
  // q0 of the block starts at element (ql, qs), ql fastest in the load phase and qs in
  // the store phase; only what can fail is checked, on the group's first element: threads
  // past a tile of fewer elements than steps x threads, and the last tile along a side
  // that the tile length does not divide (phase_lanes keeps a group all in or all out).
  // `lines` go inside the checks.
  auto phase_loop = [&](bool load_phase, int lanes, const std::vector<std::string>& lines) {
    const int64_t groups = elems / lanes;
    const std::string q = lanes == 1 ? "q" : "q0";
    em.line("#pragma unroll");
    em.line("for (int u = 0; u < " + std::to_string(ceil_div(groups, kTransposeThreads)) + "; ++u) {");
    em.line("  const int " + q + " = " + (lanes == 1 ? "threadIdx.x + u * " + threads
                                                     : "(threadIdx.x + u * " + threads + ") * " + std::to_string(lanes)) + ";");
    if (load_phase) {
      em.line("  const int ql = " + q + " % " + TL + ", qs = " + q + " / " + TL + ";");
    } else {
      em.line("  const int qs = " + q + " % " + TS + ", ql = " + q + " / " + TS + ";");
    }
    em.line("  const " + I + " lg = l0 + ql, sg = s0 + qs;");
    std::vector<std::string> checks;
    if (groups % kTransposeThreads) checks.push_back(q + " < " + std::to_string(elems));
    if (t.load.extent % t.load.tile) checks.push_back("lg < " + std::to_string(t.load.extent));
    if (t.store.extent % t.store.tile) checks.push_back("sg < " + std::to_string(t.store.extent));
    std::string cond;
    for (const auto& c : checks) cond += (cond.empty() ? "" : " && ") + c;
    const std::string pad = checks.empty() ? "  " : "    ";
    if (!checks.empty()) em.line("  if (" + cond + ") {");
    for (const auto& l : lines) em.line(pad + l);
    if (!checks.empty()) em.line("  }");
    em.line("}");
  };

  // Load phase: staged values into shared memory.
  auto load_phase = [&](int lanes) {
    em.open_scope(side_vars);
    coordinate_lines();
    std::vector<std::string> tail;
    for (const auto& [b, e] : staged_load) {
      const Expr linear = side_linear(e->args[0], t);
      if (lanes == 1) {
        em.line(shared_name(b) + "[" + layout.at("ql", "qs") + "] = " + em.emit(load(b, linear, e->dtype)) + ";");
        continue;
      }
      const std::string index = em.emit(linear);
      const DType dt = p.buffers[b].dtype;
      const std::string vt = vector_type(vector_bytes(dt, lanes)), word = "raw" + std::to_string(b);
      em.line("const " + vt + " " + word + " = *(const " + vt + "*)(" + em.buffer_name(b) + " + " + index + ");");
      tail.push_back("  " + shared_name(b) + "[" + layout.at("qk % " + TL, "qk / " + TL) + "] = " + lane_value(dt, word, "j") + ";");
    }
    std::vector<std::string> lines = em.close_scope();
    if (lanes > 1) {
      lines.push_back("#pragma unroll");
      lines.push_back("for (int j = 0; j < " + std::to_string(lanes) + "; ++j) {");
      lines.push_back("  const int qk = q0 + j;");
      lines.insert(lines.end(), tail.begin(), tail.end());
      lines.push_back("}");
    }
    phase_loop(true, lanes, lines);
  };

  // Store phase: each element's items, from shared memory and the other loads; with
  // lanes, a group's values gathered in a vector word per stored buffer, stored once.
  auto store_phase = [&](int lanes) {
    em.open_scope(side_vars);
    coordinate_lines();
    for (const auto& item : stage.items) em.set_min_load_level(p.computed[item.computed].buffer, em.depth());
    for (const auto& [b, e] : staged_load) {
      const std::string name = "st" + std::to_string(b);
      em.line("const " + CEmitter::c_type(p.buffers[b].dtype) + " " + name + " = " + shared_name(b) + "[" +
              layout.at("ql", "qs") + "];");
      em.bind_local(b, name, em.depth());
    }
    std::vector<std::string> before, after;
    for (const auto& item : stage.items) {
      const ComputedBuffer& c = p.computed[item.computed];
      const DType dt = p.buffers[c.buffer].dtype;
      std::string v = em.emit(item.value);
      if (in_memory[c.buffer]) {
        const std::string index = em.emit(side_linear(item.store_index, t));
        if (lanes == 1) {
          em.line(CEmitter::store_text(em.buffer_name(c.buffer), index, dt, v));
        } else {
          const std::string id = std::to_string(c.buffer), vt = vector_type(vector_bytes(dt, lanes));
          em.line(CEmitter::store_text("(" + lane_pointer(dt, false) + "&out" + id + ")", "j", dt, v));
          em.line("if (j == 0) va" + id + " = " + index + ";");
          before.push_back(vt + " out" + id + ";");
          before.push_back("int64_t va" + id + " = 0;");
          after.push_back("*(" + vt + "*)(" + em.buffer_name(c.buffer) + " + va" + id + ") = out" + id + ";");
        }
      }
      em.bind_local(c.buffer, v, em.depth());
    }
    std::vector<std::string> lines = em.close_scope();
    if (lanes > 1) {
      std::vector<std::string> group = before;
      group.push_back("#pragma unroll");
      group.push_back("for (int j = 0; j < " + std::to_string(lanes) + "; ++j) {");
      group.push_back("  const int q = q0 + j;");
      group.push_back("  const int qs = q % " + TS + ", ql = q / " + TS + ";");
      group.push_back("  const " + I + " lg = l0 + ql, sg = s0 + qs;");
      for (const auto& l : lines) group.push_back("  " + l);
      group.push_back("}");
      group.insert(group.end(), after.begin(), after.end());
      lines = group;
    }
    phase_loop(false, lanes, lines);
  };

  std::vector<std::pair<int, std::string>> rest_vars;
  for (int v : t.rest_vars) rest_vars.push_back({v, var_name(v)});
  // The loop over tiles, its phases with vector accesses or not.
  auto tile_loop = [&](int load_lanes, int store_lanes) {
    em.open_scope(rest_vars);
    // Tile index: rest dims outermost, then load tiles, then store tiles.
    const std::string per_rest = std::to_string(load_tiles * store_tiles);
    if (!t.rest_vars.empty()) {
      em.line("const " + I + " r = tile / " + per_rest + ";");
      std::vector<int> vars(t.rest_vars.rbegin(), t.rest_vars.rend());
      std::vector<int64_t> sizes(t.rest_sizes.rbegin(), t.rest_sizes.rend());
      for (const auto& l : coordinates("r", vars, sizes)) em.line(l);
    }
    const std::string by_load = store_tiles == 1 ? "tile" : "(tile / " + std::to_string(store_tiles) + ")";
    em.line("const " + I + " l0 = " + (load_tiles == 1 ? "0" : by_load + " % " + std::to_string(load_tiles) + " * " + TL) + ";");
    em.line("const " + I + " s0 = " + (store_tiles == 1 ? "0" : "tile % " + std::to_string(store_tiles) + " * " + TS) + ";");
    load_phase(load_lanes);
    em.line("__syncthreads();");
    store_phase(store_lanes);
    const bool loops = t.tiles() > static_cast<int64_t>(t.grid());
    if (loops) em.line("__syncthreads();  /* the next tile reuses shared memory */");
    std::vector<std::string> out;
    out.push_back("for (" + I + " tile = blockIdx.x; tile < " + std::to_string(t.tiles()) + "; tile += gridDim.x) {");
    for (const auto& l : em.close_scope()) out.push_back("  " + l);
    out.push_back("}");
    return out;
  };

  std::vector<std::string> out;
  for (int b : t.staged)
    out.push_back("__shared__ " + CEmitter::c_type(p.buffers[b].dtype) + " " + shared_name(b) + "[" +
                  std::to_string(layout.size) + "];");
  if (t.load_lanes == 0 && t.store_lanes == 0) {
    for (const auto& l : tile_loop(1, 1)) out.push_back(l);
    return out;
  }
  std::set<int> vector_buffers;
  if (t.load_lanes) vector_buffers.insert(t.staged.begin(), t.staged.end());
  if (t.store_lanes)
    for (const auto& item : stage.items)
      if (in_memory[p.computed[item.computed].buffer]) vector_buffers.insert(p.computed[item.computed].buffer);
  std::string aligned;
  for (int b : vector_buffers) aligned += (aligned.empty() ? "" : " | ") + std::string("(uintptr_t)") + em.buffer_name(b);
  out.push_back("if (((" + aligned + ") & 15) == 0) {  /* vector accesses: their pointers 16-byte aligned */");
  for (const auto& l : tile_loop(std::max(t.load_lanes, 1), std::max(t.store_lanes, 1))) out.push_back("  " + l);
  out.push_back("  return;");
  out.push_back("}");
  for (const auto& l : tile_loop(1, 1)) out.push_back(l);
  return out;
}

}  // namespace ember
