#include "codegen/cuda/transpose.h"

#include <algorithm>
#include <map>
#include <set>

#include "codegen/cuda/vector_access.h"

namespace ember {

namespace {

std::string var_name(int v) {
  return v >= kInnerVarBase ? "i" + std::to_string(v - kInnerVarBase) : "o" + std::to_string(v - kOuterVarBase);
}

// A size as C: its value, or its expression over the symbols (sym[k]).
std::string size_text(const Dim& d, CEmitter& em) {
  return d.is_static() ? std::to_string(d.hint()) : "(" + em.emit(d.expr()) + ")";
}

// `const int64_t <var> = ...;` for each var of `vars` (innermost first), splitting `flat`
// (less than the product of `sizes`).
std::vector<std::string> coordinates(const std::string& flat, const std::vector<int>& vars, const Dims& sizes,
                                     CEmitter& em) {
  std::vector<std::string> lines;
  Dim stride = 1;
  for (size_t d = 0; d < vars.size(); ++d) {
    std::string q = stride == Dim(1) ? flat : "(" + flat + " / " + size_text(stride, em) + ")";
    if (d + 1 < vars.size()) q += " % " + size_text(sizes[d], em);
    lines.push_back("const int64_t " + var_name(vars[d]) + " = (int64_t)(" + q + ");");
    stride *= sizes[d];
  }
  return lines;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
Dim ceil_div(const Dim& a, int64_t b) { return floordiv(a + Dim(b - 1), Dim(b)); }

// Var ids for a tile element's flat coordinates along each side (named lg and sg).
constexpr int kLoadSideVar = kInnerVarBase + (1 << 21);
constexpr int kStoreSideVar = kLoadSideVar + 1;

// `index` with each side's dims folded into that side's flat coordinate, when it sees
// the side as one dim (sum of coef * var over the side = coef of the first * flat):
// const + rest terms + c_S * sg + c_L * lg, with no division or modulo per element.
// Otherwise `index` unchanged (it reads the coordinates).
Expr side_linear(const Expr& index, const TransposePlan& t) {
  auto f = index_form(index);
  if (!f) return index;
  const auto cl = side_coef(*f, t.load), cs = side_coef(*f, t.store);
  if (!cl || !cs) return index;
  Expr out = int_const(0);
  for (int v : t.rest_vars) {
    const Dim c = coef_of(*f, v);
    if (c != Dim(0)) out = add(out, mul(var(v), c.expr()));
  }
  out = add(out, f->constant.expr());
  out = add(out, mul(var(kStoreSideVar), cs->expr()));
  return add(out, mul(var(kLoadSideVar), cl->expr()));
}

}  // namespace

std::vector<std::string> transpose_body(const TransposePlan& t, const Program& p, const Kernel& k,
                                        const std::vector<bool>& in_memory, CEmitter& em) {
  const Stage& stage = k.stages[0];
  const std::string I = t.wide ? "int64_t" : "int";
  const TileLayout layout(t);
  const Dim load_tiles = ceil_div(t.load.extent, t.load.tile), store_tiles = ceil_div(t.store.extent, t.store.tile);
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
    for (const auto& l : coordinates("lg", t.load.vars, t.load.sizes, em)) em.line(l);
    for (const auto& l : coordinates("sg", t.store.vars, t.store.sizes, em)) em.line(l);
  };
  // One phase's loop over the tile, `lanes` elements a thread per step (1: scalar). Group
  // q0 of the block starts at element (ql, qs), ql fastest in the load phase and qs in
  // the store phase; only what can fail is checked, on the group's first element: threads
  // past a tile of fewer elements than steps x threads, and the last tile along a side
  // that the tile length does not divide (phase_lanes keeps a group all in or all out).
  // `lines` go inside the checks.
  auto phase_loop = [&](bool load_phase, int lanes, const std::vector<std::string>& lines) {
    const int64_t groups = elems / lanes, steps = ceil_div(groups, kTransposeThreads);
    const std::string q = lanes == 1 ? "q" : "q0";
    // At most kTransposeUnroll steps unrolled: ptxas (NVRTC 13.0's, -O3) dropped the stores
    // of steps 35 to 63 of a fully unrolled 65-step loop whose value was a uniform select
    // (GPU fuzz seed 169125: where(0-d mask, 1, x) of a 129 x 4099 int8 transpose; correct
    // at -O1, or with 16 or 32 unrolled), and 16 was also faster there (11.3 us, 13.8 full).
    em.line(steps > kTransposeUnroll ? "#pragma unroll " + std::to_string(kTransposeUnroll) : "#pragma unroll");
    em.line("for (int u = 0; u < " + std::to_string(steps) + "; ++u) {");
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
    // A symbolic side's last tile may be partial at any size.
    if (!known_multiple(t.load.extent, t.load.tile)) checks.push_back("lg < " + size_text(t.load.extent, em));
    if (!known_multiple(t.store.extent, t.store.tile)) checks.push_back("sg < " + size_text(t.store.extent, em));
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
    const std::string per_rest = size_text(load_tiles * store_tiles, em);
    if (!t.rest_vars.empty()) {
      em.line("const " + I + " r = tile / " + per_rest + ";");
      std::vector<int> vars(t.rest_vars.rbegin(), t.rest_vars.rend());
      Dims sizes(t.rest_sizes.rbegin(), t.rest_sizes.rend());
      for (const auto& l : coordinates("r", vars, sizes, em)) em.line(l);
    }
    const std::string LT = size_text(load_tiles, em), ST = size_text(store_tiles, em);
    const std::string by_load = store_tiles == Dim(1) ? "tile" : "(tile / " + ST + ")";
    em.line("const " + I + " l0 = " + (load_tiles == Dim(1) ? "0" : by_load + " % " + LT + " * " + TL) + ";");
    em.line("const " + I + " s0 = " + (store_tiles == Dim(1) ? "0" : "tile % " + ST + " * " + TS) + ";");
    load_phase(load_lanes);
    em.line("__syncthreads();");
    store_phase(store_lanes);
    // With symbols the grid is capped per call (kMaxTransposeGrid): blocks may loop.
    const bool loops = t.symbolic || t.tiles().hint() > static_cast<int64_t>(t.grid());
    if (loops) em.line("__syncthreads();  /* the next tile reuses shared memory */");
    std::vector<std::string> out;
    out.push_back("for (" + I + " tile = blockIdx.x; tile < " + size_text(t.tiles(), em) + "; tile += gridDim.x) {");
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
