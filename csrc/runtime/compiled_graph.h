// A graph compiled for the CPU: the pipeline (pipeline.h) to C source, then the
// kernels built (memory cache, then disk cache, then the C compiler) and loaded, and
// the launcher Python calls between extern ops.
//
// With CompileOptions::background the C compiler (a subprocess, seconds for a large
// graph) runs on a thread of its own and compile() returns as soon as everything else is
// done: the buffers, steps and arena are known, and the caller can go on (AOTAutograd
// traces the backward, Dynamo the next frame) while the kernels build. wait_kernels()
// joins the build and throws what it threw; run_step waits by itself.
//
// Execution is a list of steps: groups of consecutive kernels (one call from
// Python runs a whole group) and extern ATen calls (run by Python). Buffers are
// numbered; Python owns their memory (torch tensors) and passes base pointers.
#pragma once
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/c_kernel.h"
#include "ir/graph.h"
#include "lower/program.h"
#include "pipeline.h"
#include "schedule/exec_steps.h"
#include "schedule/kernel.h"
#include "schedule/memory_plan.h"

namespace ember {

class SharedLibrary;

struct CompileOptions {
  PipelineOptions pipeline;     // its target and dump are set by compile()
  bool disk_cache = true;
  std::string cache_dir;        // empty: the default (~/.cache/ember or $EMBER_CACHE_DIR)
  std::string debug_dir;        // non-empty: write the IR after each pass and the source here
  bool background = false;      // run the C compiler on a thread; see wait_kernels()
  bool build = true;            // false: stop after the C source and the memory plan (no kernels)
};

// A kernel library built by the C compiler (or being built), with what building it took.
struct BuiltLibrary {
  std::shared_ptr<SharedLibrary> library;
  double compile_seconds = 0;  // the C compiler's run
  double load_seconds = 0;     // installing into the disk cache and loading
};

class CompiledGraph {
 public:
  static std::shared_ptr<CompiledGraph> compile(const std::string& graph_text, const CompileOptions& opts);
  ~CompiledGraph();

  const Graph& graph() const { return c_.graph; }
  const Program& program() const { return c_.program; }
  const Schedule& schedule() const { return c_.schedule; }
  const GeneratedCode& code() const { return c_.c_code; }
  const std::vector<ExecStep>& steps() const { return c_.steps.steps; }
  // compile and load are 0 until the kernels are loaded (kernels_ready()).
  const PhaseTimes& times() const { return c_.times; }
  const std::string& cache_key() const { return key_; }
  // Intermediates that never leave the graph live in one arena of this size,
  // reused across calls; arena_offset(b) is -1 for buffers allocated per call.
  // For a graph with symbols these are the plan at the hints; arena_at() plans
  // for the sizes of a call (lifetimes are fixed, byte counts are not).
  int64_t arena_bytes() const { return c_.arena.arena_bytes; }
  int64_t arena_offset(int buffer) const { return c_.arena.offset.empty() ? -1 : c_.arena.offset[buffer]; }
  MemoryPlan arena_at(const std::vector<int64_t>& symbols) const;
  // The graph's symbols (docs/dynamic_shapes.md): how many, and their hints.
  int num_symbols() const { return static_cast<int>(c_.graph.symbols.size()); }
  std::vector<int64_t> hints() const { return c_.graph.hints(); }
  // "memory", "disk" or "miss" (compiled now); "none" when there are no kernels.
  const std::string& cache_status() const { return cache_status_; }
  const std::string& cache_note() const { return cache_note_; }  // why the disk cache was bypassed
  // The IR after each pass, in pipeline order; empty unless opts.debug_dir was set.
  const std::vector<PassDump>& passes() const { return c_.passes; }
  std::string program_text() const { return c_.program_text(); }
  std::string schedule_text() const { return c_.schedule_text(); }

  // Whether the kernels are loaded: always after a compile without opts.background
  // (which throws instead), and after a successful wait_kernels().
  bool kernels_ready() const { return ready_.load(std::memory_order_acquire); }
  // Blocks until the background build has finished and loads its kernels; throws what
  // the C compiler or the loader threw (again on every call: a failed graph stays failed).
  // Safe to call from several threads.
  void wait_kernels();

  // Runs the kernels of step `step` with the buffers' base pointers, in the order
  // of steps()[step].args, and the call's symbol values (one per graph symbol).
  // Waits for the kernels first if they are still being built.
  void run_step(int step, const std::vector<uintptr_t>& ptrs, const std::vector<int64_t>& symbols = {});

 private:
  CompiledGraph() = default;
  void load_kernels(const CompileOptions& opts);
  void resolve_kernels();

  Compiled c_;
  std::string key_;
  std::string cache_status_ = "none";
  std::string cache_note_;
  std::shared_ptr<SharedLibrary> library_;
  std::shared_future<BuiltLibrary> build_;  // valid while (or after) the C compiler runs
  std::mutex wait_mutex_;
  std::atomic<bool> ready_{false};
  using LaunchFn = void (*)(int64_t rows, int64_t grain, char* const* args);
  std::vector<LaunchFn> fns_;
  std::vector<int64_t> grains_;
};

// The default cache directory: $EMBER_CACHE_DIR, else ~/.cache/ember.
std::string default_cache_dir();
// The C compiler's identity (path, version, flags, resolved target), which every CPU
// kernel cache key covers: a precompiled artifact records it, so that a loader on another
// machine says why its kernels do not apply (python/ember/precompile.py).
const std::string& c_compiler_identity();

// Process-wide counts of what CompiledGraph::compile did since the last reset, so that
// "nothing was generated or compiled again" is checkable (ember.stats()). Exact: each
// is counted where the work happens, whichever thread compiles.
struct CompileCounts {
  int64_t graphs = 0;             // CompiledGraph::compile calls
  int64_t codegen_runs = 0;       // generate_c runs (C source produced)
  int64_t c_compiler_runs = 0;    // system C compiler invocations (failed ones too)
  int64_t memory_cache_hits = 0;  // kernels found loaded in this process
  int64_t disk_cache_hits = 0;    // kernels loaded from the disk cache
};
CompileCounts compile_counts();
void reset_compile_counts();

}  // namespace ember
