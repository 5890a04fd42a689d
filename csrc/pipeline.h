// ember's compiler as one list of passes, from graph text to generated source and the
// memory plan, for the CPU and for CUDA (pipeline.cpp reads top to bottom). The compiled
// graphs (runtime/) run it and then build and load what it generated; the tests run the
// same function, so what they test is what ships.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "codegen/c/kernel.h"
#include "codegen/cuda/kernel.h"
#include "generic_paths.h"
#include "ir/graph.h"
#include "lower/lowering.h"
#include "lower/pad_matmuls.h"
#include "lower/program.h"
#include "lower/program_text.h"
#include "schedule/exec_steps.h"
#include "schedule/fuse.h"
#include "schedule/cuda/schedule_cuda.h"
#include "schedule/kernel.h"
#include "schedule/memory_plan.h"
#include "schedule/schedule_text.h"

namespace ember {

enum class Target : uint8_t { CPU, CUDA };

// Debug builds check the IR after every pass (lower/verify_program.h,
// schedule/verify_schedule.h); the tests do in every build.
#ifdef NDEBUG
constexpr bool kVerifyPasses = false;
#else
constexpr bool kVerifyPasses = true;
#endif

// Every choice the passes take from outside: Python's config fills it (bindings), a
// test sets what it tests. The passes' own parameter structs (LowerOptions,
// FuseOptions, PadMatmulOptions) are made from it in pipeline.cpp.
struct PipelineOptions {
  Target target = Target::CPU;
  bool fuse = true;                        // false: one kernel per computed buffer (debugging)
  bool emulate_precision_casts = false;    // round every f16/bf16 op result (LowerOptions)
  bool channels_last_activations = false;  // CPU graphs from Python; CUDA graphs always (LowerOptions)
  bool pad_matmuls = false;                // 16-byte aligned cuBLAS operands (lower/pad_matmuls.h):
  PadMatmulOptions pad;                    // on for CUDA graphs, on the CPU for tests only
  // CPU graphs: a convolution's weight that is a graph input (a parameter) reaches the
  // convolution as it is, for the CPU runner to prepare once (LowerOptions; python/ember/
  // runtime/prepared.py); false: a channels-last copy of it on every call. CUDA graphs: never.
  bool prepared_weights = true;
  // torch.are_deterministic_algorithms_enabled() at the compile: no atomic scatter-adds on
  // CUDA (LowerOptions::atomic_scatter_add), ATen's deterministic index_add instead.
  bool deterministic = false;
  bool descriptive_names = true;           // ember_red_var_mean_rsqrt_add_sub_plus1_3, not
                                           // ember_k3 (schedule/name_kernels.h)
  bool dump = false;                       // keep the IR after each pass (Compiled::passes)
  bool verify = kVerifyPasses;             // check the program and schedule after each pass

  static PipelineOptions cpu() { return {}; }
  static PipelineOptions cuda() {
    PipelineOptions o;
    o.target = Target::CUDA;
    o.pad_matmuls = true;
    return o;
  }
};

// The IR as text after one pass, kept when a dump is asked for.
struct PassDump {
  std::string pass;  // the pass's name in the pipeline, e.g. "fuse"
  std::string text;  // graph, program, schedule, source or memory plan
};

// Seconds spent in each phase of a compile; compile and load are the runtime's.
struct PhaseTimes {
  double parse = 0, lower = 0, schedule = 0, codegen = 0, compile = 0, load = 0;
};

// What the pipeline makes of a graph: everything up to the C compiler or NVRTC.
struct Compiled {
  Target target = Target::CPU;
  Graph graph;
  Program program;
  Schedule schedule;
  CudaSchedule cuda_schedule;            // Target::CUDA: every GPU decision
  GeneratedCode c_code;                  // Target::CPU
  CudaCode cuda_code;                    // Target::CUDA
  StepPlan steps;                        // kernels grouped into calls, extern calls
  std::vector<SizedLifetime> lifetimes;  // the arena's candidates
  MemoryPlan arena;                      // placed at the graph's hints
  std::vector<GenericPath> generic_paths;  // a graph with symbols: what they cost (generic_paths.h)
  PhaseTimes times;                      // parse, lower, schedule, codegen
  std::vector<PassDump> passes;          // empty unless PipelineOptions::dump

  const std::vector<bool>& buffer_in_memory() const;
  std::string program_text() const { return print_program(program); }
  std::string schedule_text() const { return print_schedule(schedule, program); }
};

Compiled run_pipeline(const std::string& graph_text, const PipelineOptions& opts);

// Pieces of the pipeline that run_passes (run_passes.h) shares: the lowering's options,
// the memory plan (kernels grouped into calls, the arena of intermediates by lifetime in
// those calls: the kernels of one thread or stream run in order, so a lifetime in steps
// is a real one), and the checks between passes.
LowerOptions lower_options(const PipelineOptions& opts);
FuseOptions fuse_options(const PipelineOptions& opts);
void plan_memory(Compiled& c);
void verify_compiled(const Compiled& c, const std::string& after_pass);

// The dump of the memory plan (and, for CUDA, each kernel's launch).
std::string memory_plan_text(const Compiled& c);

// Writes the dumps as <dir>/<i>_<pass>.txt, the generated source as .c or .cu.
void write_pass_dumps(const std::vector<PassDump>& passes, const std::string& dir);

double seconds_since(std::chrono::steady_clock::time_point t0);

}  // namespace ember
