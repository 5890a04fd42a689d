// Compiled graphs: what both targets show (CompiledGraphBase); the CPU graph: compile
// graph text, run kernel groups.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/program_views.h"
#include "run_passes.h"
#include "runtime/compiled_graph.h"

namespace nb = nanobind;
using ember::CompiledGraph;
using ember::CompiledGraphBase;

using namespace ember::bindings;

void define_runtime(nb::module_& m) {
  // What a compiled graph of either target shows, so that the Python runner reads either.
  nb::class_<CompiledGraphBase>(m, "CompiledGraphBase")
      .def_prop_ro("graph_text", [](const CompiledGraphBase& g) { return ember::print_graph(g.graph()); })
      .def_prop_ro("program_text", &CompiledGraphBase::program_text)
      .def_prop_ro("schedule_text", &CompiledGraphBase::schedule_text)
      .def_prop_ro("source", &CompiledGraphBase::source)
      .def_prop_ro("cache_status", &CompiledGraphBase::cache_status)
      .def_prop_ro("cache_note", &CompiledGraphBase::cache_note)
      .def_prop_ro("cache_key", &CompiledGraphBase::cache_key)
      .def_prop_ro("passes", &passes_list)
      .def_prop_ro("arena_bytes", &CompiledGraphBase::arena_bytes)
      .def_prop_ro("times", &times_dict)
      .def_prop_ro("buffers", [](const CompiledGraphBase& g) {
        return buffers_at(g.program(), g.buffer_in_memory(), g.hints(), arena_of(g));
      })
      .def_prop_ro("externs", [](const CompiledGraphBase& g) { return externs_at(g.graph(), g.program(), g.hints()); })
      .def_prop_ro("outputs", [](const CompiledGraphBase& g) { return outputs_at(g.program(), g.hints()); })
      .def_prop_ro("num_symbols", &CompiledGraphBase::num_symbols)
      .def_prop_ro("symbols", [](const CompiledGraphBase& g) {
        std::vector<std::pair<std::string, int64_t>> out;
        for (const auto& s : g.graph().symbols) out.push_back({s.name, s.hint});
        return out;
      }, "(name, hint) of each symbol, in order.")
      .def_prop_ro("generic_paths", [](const CompiledGraphBase& g) {
        nb::list out;
        for (const auto& p : g.generic_paths()) {
          nb::dict d;
          d["kernel"] = p.kernel;  // "": the graph as a whole
          d["what"] = p.what;
          out.append(d);
        }
        return out;
      }, "Where symbolic sizes made the graph's kernels more general than at its hints (generic_paths.h).")
      .def("kernel_traffic", [](const CompiledGraphBase& g, const Symbols& s) {
        if (!s.empty() && s.size() != static_cast<size_t>(g.num_symbols()))
          throw std::invalid_argument("wrong number of symbol values");
        return traffic_list(g, s.empty() ? g.hints() : s);
      }, nb::arg("symbols") = Symbols{},
      "Per kernel (schedule order): the bytes it must read and write at these symbol values (empty: the "
      "hints), schedule/kernel_traffic.h.")
      .def("layout", &layout_at, nb::arg("symbols"), "Buffers, extern views, outputs and the arena plan for these symbol values.")
      .def_prop_ro("steps", [](const CompiledGraphBase& g) { return steps_list(g.steps()); });

  nb::class_<CompiledGraph, CompiledGraphBase>(m, "CompiledGraph")
      .def_prop_ro("cache_entries", [](const CompiledGraph& g) {
        return std::vector<std::pair<std::string, std::string>>{{g.cache_key(), "so"}};
      }, "(key, suffix) of the disk cache entries holding this graph's kernels.")
      .def_prop_ro("kernels", [](const CompiledGraph& g) {
        nb::list out;
        for (const auto& k : g.code().kernels) {
          nb::dict d;
          d["name"] = k.name;
          d["function"] = k.function;  // another kernel's when their text is the same
          d["rows"] = k.rows.hint();
          d["work_per_row"] = k.work_per_row;
          d["args"] = nb::cast(k.args);
          d["origins"] = nb::cast(k.origins);
          out.append(d);
        }
        return out;
      })
      .def_prop_ro("kernels_ready", &CompiledGraph::kernels_ready)
      .def("wait_kernels", &CompiledGraph::wait_kernels, nb::call_guard<nb::gil_scoped_release>(),
           "Wait for a background C compile and load its kernels; raises what it raised.")
      .def("run_step", &CompiledGraph::run_step, nb::arg("step"), nb::arg("ptrs"), nb::arg("symbols") = Symbols{},
           nb::call_guard<nb::gil_scoped_release>(), "Run the kernel group of step `step`.");

  m.def(
      "compile",
      [](const std::string& text, bool fuse, bool disk_cache, const std::string& cache_dir, const std::string& debug_dir,
         bool pad_matmuls, bool emulate_precision_casts, bool background, bool channels_last_activations,
         bool build, bool verify, bool descriptive_names) {
        ember::CompileOptions o;
        o.build = build;
        o.pipeline.verify = verify;
        o.pipeline.fuse = fuse;
        o.pipeline.pad_matmuls = pad_matmuls;
        o.pipeline.emulate_precision_casts = emulate_precision_casts;
        o.pipeline.channels_last_activations = channels_last_activations;
        o.pipeline.descriptive_names = descriptive_names;
        o.disk_cache = disk_cache;
        o.cache_dir = cache_dir;
        o.debug_dir = debug_dir;
        o.background = background;
        nb::gil_scoped_release release;
        return CompiledGraph::compile(text, o);
      },
      nb::arg("graph_text"), nb::arg("fuse") = true, nb::arg("disk_cache") = true, nb::arg("cache_dir") = "",
      nb::arg("debug_dir") = "", nb::arg("pad_matmuls") = false,
      nb::arg("emulate_precision_casts") = false, nb::arg("background") = false,
      nb::arg("channels_last_activations") = false, nb::arg("build") = true, nb::arg("verify") = ember::kVerifyPasses,
      nb::arg("descriptive_names") = true,
      "Compile graph text for the CPU. pad_matmuls runs the CUDA graphs' matmul padding (for tests); "
      "background runs the C compiler on a thread (wait_kernels() joins it); build=False stops after "
      "the C source (no kernels: for tools that read the generated code); descriptive_names=False "
      "names kernels ember_k<N> (schedule/name_kernels.h).");
  m.def(
      "run_passes",
      [](const std::string& text, const std::vector<std::string>& passes, bool cuda, bool fuse,
         bool emulate_precision_casts, bool channels_last_activations, bool pad_matmuls, bool verify,
         bool descriptive_names) {
        ember::PipelineOptions o = cuda ? ember::PipelineOptions::cuda() : ember::PipelineOptions::cpu();
        o.fuse = fuse;
        o.emulate_precision_casts = emulate_precision_casts;
        o.channels_last_activations = channels_last_activations;
        o.pad_matmuls = pad_matmuls;
        o.verify = verify;
        o.descriptive_names = descriptive_names;
        return ember::run_passes(text, passes, o);
      },
      nb::arg("text"), nb::arg("passes"), nb::arg("cuda") = false, nb::arg("fuse") = true,
      nb::arg("emulate_precision_casts") = false, nb::arg("channels_last_activations") = false,
      nb::arg("pad_matmuls") = false, nb::arg("verify") = true, nb::arg("descriptive_names") = true,
      "Named passes of the pipeline on IR text (graph, program, or program and schedule); the IR "
      "after the last one (csrc/run_passes.h).");
  m.def("default_cache_dir", &ember::default_cache_dir);
  m.def(
      "c_compiler_identity",
      [](const std::string& cache_dir, bool disk_cache) {
        nb::gil_scoped_release release;  // the probe may run the compiler
        return ember::c_compiler_identity(cache_dir, disk_cache);
      },
      nb::arg("cache_dir") = "", nb::arg("disk_cache") = true,
        "The C compiler's identity, which every CPU kernel cache key covers; its probe kept in the disk "
        "cache of cache_dir (empty: the default) when disk_cache.");
  m.def(
      "c_compiler_probe",
      [](const std::string& cache_dir, bool disk_cache) {
        nb::gil_scoped_release release;
        return ember::c_compiler_probe(cache_dir, disk_cache);
      },
      nb::arg("cache_dir") = "", nb::arg("disk_cache") = true,
      "(fingerprint, probe text) of the C compiler and this CPU (runtime/compiler_memo.h).");
  m.def("seed_c_compiler", &ember::seed_c_compiler, nb::arg("fingerprint"), nb::arg("probe"),
        "Takes a probe recorded under this compiler's fingerprint; False (nothing changes) otherwise.");
  m.def("compile_counts", [] { return counts_dict(ember::Target::CPU, "c_compiler_runs"); },
        "What CompiledGraph::compile did in this process since the last reset_compile_counts().");
  m.def("reset_compile_counts", [] { ember::reset_compile_counts(ember::Target::CPU); });
  m.attr("__version__") = EMBER_VERSION;
}
