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
#include <utility>
#include <vector>

#include "codegen/c/kernel.h"
#include "runtime/graph_base.h"

namespace ember {

class SharedLibrary;

struct CompileOptions : GraphOptions {
  bool background = false;  // run the C compiler on a thread; see wait_kernels()
};

// A kernel library built by the C compiler (or being built), with what building it took.
struct BuiltLibrary {
  std::shared_ptr<SharedLibrary> library;
  double compile_seconds = 0;  // the C compiler's run
  double load_seconds = 0;     // installing into the disk cache and loading
};

class CompiledGraph : public CompiledGraphBase {
 public:
  static std::shared_ptr<CompiledGraph> compile(const std::string& graph_text, const CompileOptions& opts);
  ~CompiledGraph();

  const GeneratedCode& code() const { return c_.c_code; }

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

  std::shared_ptr<SharedLibrary> library_;
  std::shared_future<BuiltLibrary> build_;  // valid while (or after) the C compiler runs
  std::mutex wait_mutex_;
  std::atomic<bool> ready_{false};
  using LaunchFn = void (*)(int64_t rows, int64_t grain, char* const* args);
  std::vector<LaunchFn> fns_;
  std::vector<int64_t> grains_;
};

// The C compiler's identity (path, version, flags, resolved target), which every CPU
// kernel cache key covers: a precompiled artifact records it, so that a loader on another
// machine says why its kernels do not apply (python/ember/caches/precompile.py). Its probe comes
// from the disk cache in cache_dir (empty: the default) when kept there (compiler_memo.h).
const std::string& c_compiler_identity(const std::string& cache_dir = "", bool disk_cache = true);
// The compiler's fingerprint and its probe as text (compiler_memo.h): a precompiled
// artifact carries them, so that a loader whose compiler and CPU have the same
// fingerprint (the machine that saved it, or its twin) takes the probe instead of running
// the compiler: seed_c_compiler (false, and nothing changes, when the fingerprints differ
// or the text is not a probe; the identity is then probed and compared as before).
std::pair<std::string, std::string> c_compiler_probe(const std::string& cache_dir = "", bool disk_cache = true);
bool seed_c_compiler(const std::string& fingerprint, const std::string& probe);

}  // namespace ember
