// A graph compiled for a CUDA device: the pipeline (pipeline.h) to CUDA source, then
// cubins (memory cache, then disk cache, then NVRTC) loaded by cuModuleLoadData.
// Execution is the CPU graph's: a list of steps, kernel groups and extern ATen calls;
// Python owns the buffers (torch CUDA tensors from its caching allocator) and passes
// their device pointers and the stream to run_step().
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "runtime/graph_base.h"

namespace ember {

class CudaModule;

struct CudaCompileOptions : GraphOptions {
  CudaCompileOptions() { pipeline = PipelineOptions::cuda(); }
  std::string arch = "sm_90";          // NVRTC's --gpu-architecture (real: sm_XX)
  int device = -1;                     // CUDA device ordinal to load on; -1: compile only (no GPU needed)
  std::vector<std::string> nvrtc_dirs; // where to look for libnvrtc first (nvrtc.h)
  int kernels_per_part = 1;            // kernels per NVRTC program (cuda_compiled_graph.cpp, split_parts)
};

// max-autotune's outcome for one kernel function (runtime/cuda_autotune.cpp).
struct AutotuneDecision {
  std::string kernel;                // the kernel whose function it is (others may share it)
  std::vector<std::string> choices;  // LaunchChoice::text() of each candidate; [0] "default"
  std::vector<double> us;            // microseconds a launch, per candidate; empty when cached
  int chosen = 0;
  bool cached = false;               // taken from the memory or disk cache, not timed here
};

class CudaCompiledGraph : public CompiledGraphBase {
 public:
  // Throws CudaUnsupported for what the CUDA printer does not handle yet, and
  // std::runtime_error for an NVRTC or driver failure (with NVRTC's log).
  static std::shared_ptr<CudaCompiledGraph> compile(const std::string& graph_text, const CudaCompileOptions& opts);

  const CudaCode& code() const { return c_.cuda_code; }
  const CudaSchedule& cuda_schedule() const { return c_.cuda_schedule; }
  // NVRTC's seconds for each program this compile ran (none on a cache hit), in part order.
  const std::vector<double>& nvrtc_seconds() const { return nvrtc_seconds_; }
  // One cubin per part of the source (the prelude and up to 6 kernels; compiled in parallel).
  const std::vector<std::string>& cubins() const { return cubins_; }
  // The disk cache key of each cubin (parallel to cubins()).
  const std::vector<std::string>& part_keys() const { return part_keys_; }
  // Per kernel (parallel to code().kernels): {registers a thread, blocks an SM holds}
  // of its main launch, from the driver; -1 where it cannot say or the graph is not loaded.
  std::vector<std::pair<int, int>> kernel_resources() const;
  // The blocks kernel k is launched with: its grid, or fewer for a hoisted kernel (as many
  // as the SMs hold at once; set when the graph is loaded on a device).
  uint32_t launch_grid(int k) const;

  // Launches the kernels of step `step` on `stream` with the buffers' device pointers, in
  // the order of steps()[step].args, and the call's symbol values (one per graph symbol).
  // Asynchronous; throws if the graph was not loaded.
  void run_step(int step, const std::vector<uintptr_t>& ptrs, uintptr_t stream,
                const std::vector<int64_t>& symbols = {}) const;

  // max-autotune (runtime/cuda_autotune.cpp): every kernel function with launch variants
  // (codegen: generate_cuda_variants) gets its decision from the memory or disk cache,
  // applied at once, or is left to time at the first call, its variants compiled now.
  // `tag` names the device, whose decisions are its own. Returns the scratch bytes that
  // run_step_tuning needs (0: nothing to time). Static graphs on a device only.
  int64_t prepare_autotune(const std::string& tag);
  bool autotune_pending() const;
  // run_step, after timing the variants of the step's kernels still undecided on the
  // step's own buffers, with their stores sent to `scratch` (so that no buffer the graph
  // reads or returns is written): each candidate is launched a few times in a row between
  // two events, the fastest kept, and the choice cached. Waits for the device when it times.
  void run_step_tuning(int step, const std::vector<uintptr_t>& ptrs, uintptr_t stream, uintptr_t scratch);
  std::vector<AutotuneDecision> autotune_decisions() const;
  // max-autotune's candidates for kernel k (its launch variants), as printed for timing.
  std::vector<CudaKernelVariant> variants(int k) const;

 private:
  CudaCompiledGraph() = default;
  void compile_cubin(const CudaCompileOptions& opts);
  uint32_t resident_grid(const CudaKernelInfo& info, void* fn) const;
  // max-autotune: a kernel function and its candidates (index 0: the default launch).
  struct Tuning {
    int owner = 0;                      // the kernel whose function it is
    std::string key;                    // its decision's cache key
    std::vector<std::string> choices;   // LaunchChoice::text()
    std::vector<CudaKernelInfo> infos;  // each candidate's launch (the owner's buffers)
    std::vector<void*> fns;             // each candidate's function
    bool decided = false;
  };
  void apply_choice(Tuning& t, int candidate, std::vector<double> us, bool cached);

  std::vector<double> nvrtc_seconds_;
  std::vector<std::string> cubins_;
  std::vector<std::shared_ptr<CudaModule>> modules_;
  std::vector<void*> fns_;
  std::vector<void*> partial_fns_;  // parallel to fns_: a column split's first launch, or null
  std::vector<uint32_t> launch_grid_;  // parallel to fns_: see launch_grid()
  CudaCompileOptions opts_;
  std::vector<std::string> part_keys_;  // parallel to cubins_
  std::vector<Tuning> tunings_;         // max-autotune: one per kernel function with variants
  std::vector<AutotuneDecision> decisions_;
  mutable std::mutex tuning_mutex_;
};

}  // namespace ember
