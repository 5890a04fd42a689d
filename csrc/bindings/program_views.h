// Python views of a compiled graph's Program, for either target (the runner reads the
// same dicts): buffers, extern calls, outputs and steps, with sizes evaluated at given
// symbol values (the hints for a static view).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <vector>

#include "ir/graph.h"
#include "lower/program.h"
#include "runtime/graph_base.h"
#include "schedule/exec_steps.h"
#include "schedule/kernel_traffic.h"
#include "schedule/memory_plan.h"

namespace ember::bindings {

namespace nb = nanobind;
using Symbols = std::vector<int64_t>;

inline nb::tuple view_tuple(const StridedView& v, const Symbols& s) {
  return nb::make_tuple(v.buffer, dtype_name(v.dtype), nb::cast(eval_dims(v.sizes, s)), nb::cast(eval_dims(v.strides, s)),
                        eval_dim(v.offset, s));
}

inline const char* buffer_kind(Buffer::Kind k) {
  switch (k) {
    case Buffer::Kind::Input: return "input";
    case Buffer::Kind::Extern: return "extern";
    default: return "computed";
  }
}

inline nb::list buffers_at(const Program& p, const std::vector<bool>& in_memory, const Symbols& s, const MemoryPlan& arena) {
  nb::list out;
  for (const auto& b : p.buffers) {
    nb::dict d;
    d["id"] = b.id;
    d["kind"] = buffer_kind(b.kind);
    d["dtype"] = dtype_name(b.dtype);
    d["sizes"] = nb::cast(eval_dims(b.sizes, s));
    d["strides"] = nb::cast(eval_dims(b.strides, s));
    d["input_index"] = b.input_index;
    d["opaque"] = b.opaque;
    d["arena_offset"] = arena.offset.empty() ? int64_t(-1) : arena.offset[b.id];
    d["in_memory"] = static_cast<bool>(in_memory.empty() ? true : in_memory[b.id]);
    out.append(d);
  }
  return out;
}

inline nb::list externs_at(const Graph& g, const Program& p, const Symbols& s) {
  nb::list out;
  for (const auto& e : p.externs) {
    nb::dict d;
    d["node"] = e.node;
    d["op"] = g.nodes[e.node].op;
    d["reason"] = e.reason;
    nb::list args;
    for (size_t i = 0; i < e.tensor_args.size(); ++i)
      args.append(nb::make_tuple(e.tensor_args[i].node, e.tensor_args[i].index, view_tuple(e.tensor_views[i], s)));
    d["tensor_args"] = args;
    nb::list none_args;  // passed as None: ember's kernels apply them
    for (const ValueRef& r : e.none_args) none_args.append(nb::make_tuple(r.node, r.index));
    d["none_args"] = none_args;
    d["output_buffers"] = nb::cast(e.output_buffers);
    d["prepared_args"] = nb::cast(e.prepared_args);
    nb::list padded;  // (argument position, the copy's sizes, its strides)
    for (const auto& pa : e.padded_args)
      padded.append(nb::make_tuple(pa.arg, nb::cast(eval_dims(pa.sizes, s)), nb::cast(eval_dims(pa.strides, s))));
    d["padded_args"] = padded;
    out.append(d);
  }
  return out;
}

inline nb::list outputs_at(const Program& p, const Symbols& s) {
  nb::list out;
  for (const auto& o : p.outputs) out.append(o.is_tensor ? nb::object(view_tuple(o.view, s)) : nb::none());
  return out;
}

inline nb::list steps_list(const std::vector<ExecStep>& steps) {
  nb::list out;
  for (const auto& st : steps) {
    if (st.kind == ExecStep::Kind::Extern)
      out.append(nb::make_tuple("extern", st.extern_call, nb::list()));
    else
      out.append(nb::make_tuple("kernels", nb::cast(st.kernels), nb::cast(st.args)));
  }
  return out;
}

// A graph's pass dumps as [(pass, text)] and its phase times as a dict.
inline nb::list passes_list(const CompiledGraphBase& g) {
  nb::list out;
  for (const auto& p : g.passes()) out.append(nb::make_tuple(p.pass, p.text));
  return out;
}

inline nb::dict times_dict(const CompiledGraphBase& g) {
  const auto& t = g.times();
  nb::dict d;
  d["parse"] = t.parse;
  d["lower"] = t.lower;
  d["schedule"] = t.schedule;
  d["codegen"] = t.codegen;
  d["compile"] = t.compile;
  d["load"] = t.load;
  return d;
}

// The arena plan a graph reports for its hints, as a MemoryPlan.
inline MemoryPlan arena_of(const CompiledGraphBase& g) {
  MemoryPlan arena;
  arena.arena_bytes = g.arena_bytes();
  for (size_t b = 0; b < g.program().buffers.size(); ++b) arena.offset.push_back(g.arena_offset(static_cast<int>(b)));
  return arena;
}

// Buffers, extern views, outputs and the arena plan of graph `g` at symbol values `s`:
// the runner's plan for those sizes.
inline nb::dict layout_at(const CompiledGraphBase& g, const Symbols& s) {
  if (s.size() != static_cast<size_t>(g.num_symbols())) throw std::invalid_argument("wrong number of symbol values");
  MemoryPlan arena = g.arena_at(s);
  nb::dict d;
  d["buffers"] = buffers_at(g.program(), g.buffer_in_memory(), s, arena);
  d["externs"] = externs_at(g.graph(), g.program(), s);
  d["outputs"] = outputs_at(g.program(), s);
  d["arena_bytes"] = arena.arena_bytes;
  return d;
}

// kernel_traffic (schedule/kernel_traffic.h) of graph `g` at symbol values `s`, as dicts.
inline nb::list traffic_list(const CompiledGraphBase& g, const Symbols& s) {
  nb::list out;
  for (const auto& t : kernel_traffic(g.program(), g.schedule(), g.buffer_in_memory(), s)) {
    nb::dict d;
    d["name"] = t.name;
    d["kind"] = t.kind;
    d["read_bytes"] = t.read_bytes;
    d["write_bytes"] = t.write_bytes;
    nb::list reads, writes;
    for (const auto& r : t.reads) reads.append(nb::make_tuple(r.buffer, r.bytes));
    for (const auto& w : t.writes) writes.append(nb::make_tuple(w.buffer, w.bytes));
    d["reads"] = reads;    // (buffer id, bytes)
    d["writes"] = writes;
    out.append(d);
  }
  return out;
}

// What compile_counts() and cuda_compile_counts() return; `compiler` names the compiler's runs.
inline nb::dict counts_dict(Target target, const char* compiler) {
  const CompileCounts c = compile_counts(target);
  nb::dict d;
  d["graphs"] = c.graphs;
  d["codegen_runs"] = c.codegen_runs;
  d[compiler] = c.compiler_runs;
  d["memory_cache_hits"] = c.memory_cache_hits;
  d["disk_cache_hits"] = c.disk_cache_hits;
  return d;
}

}  // namespace ember::bindings
