// What a graph compiled for the CPU (compiled_graph.h) and one compiled for CUDA
// (cuda_compiled_graph.h) share: the pipeline's output (pipeline.h) and what it says
// about the graph, its memory plan at any symbol values, and where its kernels came
// from. Each target adds how it builds, loads and launches them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline.h"
#include "schedule/exec_steps.h"
#include "schedule/memory_plan.h"

namespace ember {

class DiskCache;

// How a graph is compiled, for either target.
struct GraphOptions {
  PipelineOptions pipeline;  // its target and dump are set by the target's compile()
  bool disk_cache = true;
  std::string cache_dir;     // empty: default_cache_dir()
  std::string debug_dir;     // non-empty: write the IR after each pass and the source here
  bool build = true;         // false: stop after the source and the memory plan (no kernels)
};

// The default cache directory: $EMBER_CACHE_DIR, else ~/.cache/ember.
std::string default_cache_dir();

// The disk cache that opts asks for, or null (no disk cache, or an unusable one: then
// *note says why).
std::unique_ptr<DiskCache> open_disk_cache(const GraphOptions& opts, std::string* note);

class CompiledGraphBase {
 public:
  const Graph& graph() const { return c_.graph; }
  const Program& program() const { return c_.program; }
  const Schedule& schedule() const { return c_.schedule; }
  const std::vector<ExecStep>& steps() const { return c_.steps.steps; }
  // The generated source (C or CUDA), and which buffers live in memory.
  const std::string& source() const { return c_.target == Target::CPU ? c_.c_code.source : c_.cuda_code.source; }
  const std::vector<bool>& buffer_in_memory() const { return c_.buffer_in_memory(); }
  // compile and load are 0 until the kernels are built and loaded.
  const PhaseTimes& times() const { return c_.times; }
  const std::string& cache_key() const { return key_; }
  // "memory", "disk" or "miss" (compiled now); "none" when there are no kernels.
  const std::string& cache_status() const { return cache_status_; }
  const std::string& cache_note() const { return cache_note_; }  // why the disk cache was bypassed
  // The IR after each pass, in pipeline order; empty unless a debug dir was given.
  const std::vector<PassDump>& passes() const { return c_.passes; }
  // A graph with symbols: where they made a kernel more general than at static sizes.
  const std::vector<GenericPath>& generic_paths() const { return c_.generic_paths; }
  std::string program_text() const { return c_.program_text(); }
  std::string schedule_text() const { return c_.schedule_text(); }
  // Intermediates that never leave the graph live in one arena of this size, reused
  // across calls; arena_offset(b) is -1 for buffers allocated per call. For a graph with
  // symbols these are the plan at the hints; arena_at() plans for the sizes of a call
  // (lifetimes are fixed, byte counts are not).
  int64_t arena_bytes() const { return c_.arena.arena_bytes; }
  int64_t arena_offset(int buffer) const { return c_.arena.offset.empty() ? -1 : c_.arena.offset[buffer]; }
  MemoryPlan arena_at(const std::vector<int64_t>& symbols) const;
  // The graph's symbols (docs/dynamic_shapes.md): how many, and their hints.
  int num_symbols() const { return static_cast<int>(c_.graph.symbols.size()); }
  std::vector<int64_t> hints() const { return c_.graph.hints(); }

 protected:
  // Runs the pipeline for `target` and writes its dumps (before any compiler runs, so
  // that a compiler's failure leaves the source behind).
  void run_pipeline_for(Target target, const std::string& graph_text, const GraphOptions& opts);
  // The kernel group `step` and its buffers' pointers, checked against the call.
  const ExecStep& kernel_step(int step, size_t pointers, size_t symbols) const;

  Compiled c_;
  std::string key_;
  std::string cache_status_ = "none";
  std::string cache_note_;
};

// Process-wide counts of what the compiled graphs of one target did since the last reset,
// so that "nothing was generated or compiled again" is checkable (ember.stats()). Exact:
// each is counted where the work happens, whichever thread compiles.
struct CompileCounts {
  int64_t graphs = 0;             // compile() calls
  int64_t codegen_runs = 0;       // sources generated
  int64_t compiler_runs = 0;      // C compiler or NVRTC runs (failed ones too)
  int64_t memory_cache_hits = 0;  // kernels found loaded in this process
  int64_t disk_cache_hits = 0;    // kernels loaded from the disk cache
};
CompileCounts compile_counts(Target target);
void reset_compile_counts(Target target);

enum class CompileEvent : uint8_t { Graph, Codegen, CompilerRun, MemoryHit, DiskHit };
void count(Target target, CompileEvent event);

}  // namespace ember
