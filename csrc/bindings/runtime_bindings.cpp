// CompiledGraph: compile graph text, inspect the result, run kernel groups.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "runtime/compiled_graph.h"

namespace nb = nanobind;
using ember::CompiledGraph;

namespace {

using Symbols = std::vector<int64_t>;

// Views, buffers and outputs with their sizes evaluated at the given symbol values
// (the hints for the properties, a call's values for layout()).
nb::tuple view_tuple(const ember::StridedView& v, const Symbols& s) {
  return nb::make_tuple(v.buffer, ember::dtype_name(v.dtype), nb::cast(ember::eval_dims(v.sizes, s)),
                        nb::cast(ember::eval_dims(v.strides, s)), ember::eval_dim(v.offset, s));
}

const char* buffer_kind(ember::Buffer::Kind k) {
  switch (k) {
    case ember::Buffer::Kind::Input: return "input";
    case ember::Buffer::Kind::Extern: return "extern";
    default: return "computed";
  }
}

nb::list buffers_at(const CompiledGraph& g, const Symbols& s, const ember::MemoryPlan& arena) {
  nb::list out;
  const auto& p = g.program();
  for (const auto& b : p.buffers) {
    nb::dict d;
    d["id"] = b.id;
    d["kind"] = buffer_kind(b.kind);
    d["dtype"] = ember::dtype_name(b.dtype);
    d["sizes"] = nb::cast(ember::eval_dims(b.sizes, s));
    d["strides"] = nb::cast(ember::eval_dims(b.strides, s));
    d["input_index"] = b.input_index;
    d["arena_offset"] = arena.offset.empty() ? int64_t(-1) : arena.offset[b.id];
    d["in_memory"] = static_cast<bool>(g.code().buffer_in_memory.empty() ? true : g.code().buffer_in_memory[b.id]);
    out.append(d);
  }
  return out;
}

nb::list externs_at(const CompiledGraph& g, const Symbols& s) {
  nb::list out;
  for (const auto& e : g.program().externs) {
    nb::dict d;
    d["node"] = e.node;
    d["op"] = g.graph().nodes[e.node].op;
    d["reason"] = e.reason;
    nb::list args;
    for (size_t i = 0; i < e.tensor_args.size(); ++i)
      args.append(nb::make_tuple(e.tensor_args[i].node, e.tensor_args[i].index, view_tuple(e.tensor_views[i], s)));
    d["tensor_args"] = args;
    d["output_buffers"] = nb::cast(e.output_buffers);
    out.append(d);
  }
  return out;
}

nb::list outputs_at(const CompiledGraph& g, const Symbols& s) {
  nb::list out;
  for (const auto& o : g.program().outputs) out.append(o.is_tensor ? nb::object(view_tuple(o.view, s)) : nb::none());
  return out;
}

}  // namespace

void define_runtime(nb::module_& m) {
  nb::class_<CompiledGraph>(m, "CompiledGraph")
      .def_prop_ro("graph_text", [](const CompiledGraph& g) { return ember::print_graph(g.graph()); })
      .def_prop_ro("program_text", &CompiledGraph::program_text)
      .def_prop_ro("schedule_text", &CompiledGraph::schedule_text)
      .def_prop_ro("source", [](const CompiledGraph& g) { return g.code().source; })
      .def_prop_ro("cache_status", &CompiledGraph::cache_status)
      .def_prop_ro("cache_note", &CompiledGraph::cache_note)
      .def_prop_ro("cache_key", &CompiledGraph::cache_key)
      .def_prop_ro("passes", [](const CompiledGraph& g) {
        nb::list out;
        for (const auto& p : g.passes()) out.append(nb::make_tuple(p.pass, p.text));
        return out;
      })
      .def_prop_ro("arena_bytes", &CompiledGraph::arena_bytes)
      .def_prop_ro("times", [](const CompiledGraph& g) {
        const auto& t = g.times();
        nb::dict d;
        d["parse"] = t.parse;
        d["lower"] = t.lower;
        d["schedule"] = t.schedule;
        d["codegen"] = t.codegen;
        d["compile"] = t.compile;
        d["load"] = t.load;
        return d;
      })
      .def_prop_ro("buffers", [](const CompiledGraph& g) {
        ember::MemoryPlan arena;
        arena.arena_bytes = g.arena_bytes();
        for (size_t b = 0; b < g.program().buffers.size(); ++b) arena.offset.push_back(g.arena_offset(static_cast<int>(b)));
        return buffers_at(g, g.hints(), arena);
      })
      .def_prop_ro("externs", [](const CompiledGraph& g) { return externs_at(g, g.hints()); })
      .def_prop_ro("outputs", [](const CompiledGraph& g) { return outputs_at(g, g.hints()); })
      .def_prop_ro("num_symbols", &CompiledGraph::num_symbols)
      .def("layout", [](const CompiledGraph& g, const Symbols& s) {
        if (s.size() != static_cast<size_t>(g.num_symbols())) throw std::invalid_argument("wrong number of symbol values");
        ember::MemoryPlan arena = g.arena_at(s);
        nb::dict d;
        d["buffers"] = buffers_at(g, s, arena);
        d["externs"] = externs_at(g, s);
        d["outputs"] = outputs_at(g, s);
        d["arena_bytes"] = arena.arena_bytes;
        return d;
      }, nb::arg("symbols"), "Buffers, extern views, outputs and the arena plan for these symbol values.")
      .def_prop_ro("kernels", [](const CompiledGraph& g) {
        nb::list out;
        for (const auto& k : g.code().kernels) {
          nb::dict d;
          d["name"] = k.name;
          d["rows"] = k.rows.hint();
          d["work_per_row"] = k.work_per_row;
          d["args"] = nb::cast(k.args);
          d["origins"] = nb::cast(k.origins);
          out.append(d);
        }
        return out;
      })
      .def_prop_ro("steps", [](const CompiledGraph& g) {
        nb::list out;
        for (const auto& s : g.steps()) {
          if (s.kind == ember::ExecStep::Kind::Extern)
            out.append(nb::make_tuple("extern", s.extern_call, nb::list()));
          else
            out.append(nb::make_tuple("kernels", nb::cast(s.kernels), nb::cast(s.args)));
        }
        return out;
      })
      .def("run_step", &CompiledGraph::run_step, nb::arg("step"), nb::arg("ptrs"), nb::arg("symbols") = Symbols{},
           nb::call_guard<nb::gil_scoped_release>(), "Run the kernel group of step `step`.");

  m.def(
      "compile",
      [](const std::string& text, bool fuse, bool disk_cache, const std::string& cache_dir, const std::string& debug_dir) {
        ember::CompileOptions o;
        o.fuse = fuse;
        o.disk_cache = disk_cache;
        o.cache_dir = cache_dir;
        o.debug_dir = debug_dir;
        nb::gil_scoped_release release;
        return CompiledGraph::compile(text, o);
      },
      nb::arg("graph_text"), nb::arg("fuse") = true, nb::arg("disk_cache") = true, nb::arg("cache_dir") = "",
      nb::arg("debug_dir") = "");
  m.def("default_cache_dir", &ember::default_cache_dir);
  m.def("compile_counts", [] {
    ember::CompileCounts c = ember::compile_counts();
    nb::dict d;
    d["graphs"] = c.graphs;
    d["codegen_runs"] = c.codegen_runs;
    d["c_compiler_runs"] = c.c_compiler_runs;
    d["memory_cache_hits"] = c.memory_cache_hits;
    d["disk_cache_hits"] = c.disk_cache_hits;
    return d;
  }, "What CompiledGraph::compile did in this process since the last reset_compile_counts().");
  m.def("reset_compile_counts", &ember::reset_compile_counts);
  m.attr("__version__") = EMBER_VERSION;
}
