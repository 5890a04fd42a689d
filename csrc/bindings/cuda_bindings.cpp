// CudaCompiledGraph: compile graph text for a CUDA device (or only to a cubin, with no
// GPU), inspect it like a CompiledGraph, run kernel groups on a stream.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/program_views.h"
#include "jit/nvrtc.h"
#include "runtime/cubin_parts.h"
#include "runtime/cuda_compiled_graph.h"
#include "runtime/cuda_driver.h"

namespace nb = nanobind;
using ember::CudaCompiledGraph;

using namespace ember::bindings;

void define_cuda(nb::module_& m) {
  nb::exception<ember::CudaUnsupported>(m, "CudaUnsupported");
  nb::class_<CudaCompiledGraph, ember::CompiledGraphBase>(m, "CudaCompiledGraph")
      .def_prop_ro("cubins", [](const CudaCompiledGraph& g) {
        nb::list out;
        for (const auto& c : g.cubins()) out.append(nb::bytes(c.data(), c.size()));
        return out;
      })
      .def_prop_ro("nvrtc_seconds", &CudaCompiledGraph::nvrtc_seconds)
      .def_prop_ro("cache_entries", [](const CudaCompiledGraph& g) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& key : g.part_keys()) out.emplace_back(key, "cubin");
        return out;
      }, "(key, suffix) of the disk cache entries holding this graph's kernels (its cubins).")
      .def_prop_ro("kernel_resources", [](const CudaCompiledGraph& g) {
        nb::list out;
        const auto res = g.kernel_resources();
        for (size_t k = 0; k < res.size(); ++k) {
          nb::dict d;
          d["registers"] = res[k].first;
          d["blocks_per_sm"] = res[k].second;
          d["launch_grid"] = g.launch_grid(static_cast<int>(k));
          out.append(d);
        }
        return out;
      }, "Per kernel: registers a thread and blocks an SM holds (the driver's figures; -1: unknown).")
      .def_prop_ro("kernels", [](const CudaCompiledGraph& g) {
        nb::list out;
        for (const auto& k : g.code().kernels) {
          nb::dict d;
          d["name"] = k.name;
          d["function"] = k.function;  // another kernel's when their text is the same
          d["shape"] = ember::cuda_shape_name(k.shape);
          d["grid"] = k.grid;
          d["block"] = k.block;
          d["partial_grid"] = k.partial_grid;
          d["partial_block"] = k.partial_block;
          d["row_lanes"] = k.row_lanes;
          d["row_slots"] = k.row_slots;
          d["row_cached"] = nb::cast(k.row_cached);
          d["row_unstored"] = nb::cast(k.row_unstored);  // values kept in registers, in no memory
          d["hoisted_values"] = k.hoisted_values;
          d["hoisted_words"] = k.hoisted_words;
          d["grid_multiple"] = k.grid_multiple;
          d["grid_units"] = ember::print_dim(k.grid_units);  // a graph with symbols: see grid_per_block
          d["grid_per_block"] = k.grid_per_block;
          d["args"] = nb::cast(k.args);
          d["writes"] = nb::cast(k.writes);
          d["origins"] = nb::cast(k.origins);
          out.append(d);
        }
        return out;
      })
      .def("run_step", &CudaCompiledGraph::run_step, nb::arg("step"), nb::arg("ptrs"), nb::arg("stream"),
           nb::arg("symbols") = Symbols{}, "Launch the kernel group of step `step` on `stream` (asynchronous).")
      .def("prepare_autotune", &CudaCompiledGraph::prepare_autotune, nb::arg("tag"),
           nb::call_guard<nb::gil_scoped_release>(),
           "max-autotune: cached decisions applied, variants of the rest compiled; returns the scratch bytes "
           "run_step_tuning needs (0: nothing left to time).")
      .def_prop_ro("autotune_pending", &CudaCompiledGraph::autotune_pending)
      .def("run_step_tuning", &CudaCompiledGraph::run_step_tuning, nb::arg("step"), nb::arg("ptrs"), nb::arg("stream"),
           nb::arg("scratch"), nb::call_guard<nb::gil_scoped_release>(),
           "run_step after timing the launch variants of its undecided kernels (stores sent to `scratch`).")
      .def("variants", [](const CudaCompiledGraph& g, int k) {
        nb::list out;
        for (const auto& v : g.variants(k)) out.append(nb::make_tuple(v.choice_text, v.source));
        return out;
      }, nb::arg("kernel"), "max-autotune's candidates for kernel `kernel`: [(choice, source)].")
      .def_prop_ro("autotune_decisions", [](const CudaCompiledGraph& g) {
        nb::list out;
        for (const auto& d : g.autotune_decisions()) {
          nb::dict e;
          e["kernel"] = d.kernel;
          e["choices"] = nb::cast(d.choices);
          e["us"] = nb::cast(d.us);
          e["chosen"] = d.chosen;
          e["cached"] = d.cached;
          out.append(e);
        }
        return out;
      }, "Per tuned kernel function: its candidate launches, microseconds each (empty: from a cache), the one kept.");

  m.def(
      "compile_cuda",
      [](const std::string& text, const std::string& arch, int device, bool fuse, bool disk_cache,
         const std::string& cache_dir, const std::string& debug_dir, const std::vector<std::string>& nvrtc_dirs,
         bool pad_matmuls, bool emulate_precision_casts, int kernels_per_part, bool build, bool verify,
         bool descriptive_names, bool deterministic) {
        ember::CudaCompileOptions o;
        o.build = build;
        o.pipeline.verify = verify;
        o.kernels_per_part = kernels_per_part;
        o.arch = arch;
        o.device = device;
        o.pipeline.fuse = fuse;
        o.pipeline.pad_matmuls = pad_matmuls;
        o.pipeline.emulate_precision_casts = emulate_precision_casts;
        o.pipeline.descriptive_names = descriptive_names;
        o.pipeline.deterministic = deterministic;
        o.disk_cache = disk_cache;
        o.cache_dir = cache_dir;
        o.debug_dir = debug_dir;
        o.nvrtc_dirs = nvrtc_dirs;
        nb::gil_scoped_release release;
        return CudaCompiledGraph::compile(text, o);
      },
      nb::arg("graph_text"), nb::arg("arch") = "sm_90", nb::arg("device") = -1, nb::arg("fuse") = true,
      nb::arg("disk_cache") = true, nb::arg("cache_dir") = "", nb::arg("debug_dir") = "",
      nb::arg("nvrtc_dirs") = std::vector<std::string>{}, nb::arg("pad_matmuls") = true,
      nb::arg("emulate_precision_casts") = false, nb::arg("kernels_per_part") = 1, nb::arg("build") = true,
      nb::arg("verify") = ember::kVerifyPasses, nb::arg("descriptive_names") = true, nb::arg("deterministic") = false,
      "Compile graph text to a cubin for `arch`; load it on CUDA device `device` unless it is -1; "
      "build=False stops after the CUDA source (no NVRTC); descriptive_names=False names kernels "
      "ember_k<N> (schedule/name_kernels.h); deterministic=True (torch's deterministic algorithms) "
      "leaves index_add and scatter_add to ATen, not atomic adds.");
  m.def(
      "nvrtc_info",
      [](const std::vector<std::string>& dirs) {
        std::string why;
        const ember::Nvrtc* n = ember::Nvrtc::load(dirs, &why);
        nb::dict d;
        d["available"] = n != nullptr;
        d["identity"] = n ? n->identity() : std::string();
        d["path"] = n ? n->path() : std::string();
        d["reason"] = why;
        return d;
      },
      nb::arg("dirs") = std::vector<std::string>{}, "Load NVRTC (once per process) and say which one, or why not.");
  m.def(
      "seed_cubin",
      [](const std::string& key, nb::bytes cubin) { ember::seed_cubin(key, std::string(cubin.c_str(), cubin.size())); },
      nb::arg("key"), nb::arg("cubin"),
      "Put a precompiled artifact's cubin in the process's memory cache as part `key` (runtime/cubin_parts.h).");
  m.def("cuda_compile_counts", [] { return counts_dict(ember::Target::CUDA, "nvrtc_runs"); },
        "What CudaCompiledGraph::compile and NVRTC did in this process.");
}
