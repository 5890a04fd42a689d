#include "runtime/compiled_graph.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "codegen/c/units.h"
#include "jit/c_compiler.h"
#include "runtime/compiler_memo.h"
#include "ir/size_expr.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"
#include "runtime/shared_library.h"

#ifndef EMBER_VERSION
#define EMBER_VERSION "dev"
#endif

namespace ember {

namespace {

// Loaded libraries by cache key: graphs with identical code share one.
std::mutex g_memory_cache_mutex;
std::unordered_map<std::string, std::weak_ptr<SharedLibrary>>& memory_cache() {
  static auto* m = new std::unordered_map<std::string, std::weak_ptr<SharedLibrary>>();
  return *m;
}

const CCompiler& compiler() {
  static const CCompiler c;
  return c;
}

}  // namespace

const std::string& c_compiler_identity(const std::string& cache_dir, bool disk_cache) {
  GraphOptions opts;
  opts.cache_dir = cache_dir;
  opts.disk_cache = disk_cache;
  std::unique_ptr<DiskCache> disk = open_disk_cache(opts, nullptr);
  return compiler_identity(compiler(), disk.get());
}

std::pair<std::string, std::string> c_compiler_probe(const std::string& cache_dir, bool disk_cache) {
  c_compiler_identity(cache_dir, disk_cache);  // probes, or reads the probe kept in the cache
  return {compiler().fingerprint(), probe_text(compiler().probe_answers())};
}

bool seed_c_compiler(const std::string& fingerprint, const std::string& probe) {
  CompilerProbe p;
  if (fingerprint.empty() || fingerprint != compiler().fingerprint() || !parse_probe(probe, &p)) return false;
  compiler().seed(p);
  return true;
}

CompiledGraph::~CompiledGraph() {
  // A build still running writes into the disk cache and the memory cache: let it end
  // before this graph's options and library go.
  if (build_.valid()) build_.wait();
}

std::shared_ptr<CompiledGraph> CompiledGraph::compile(const std::string& graph_text, const CompileOptions& opts) {
  std::shared_ptr<CompiledGraph> cg(new CompiledGraph());
  cg->run_pipeline_for(Target::CPU, graph_text, opts);
  // Rows per task: enough work (~16k inner iterations) to pay for an OpenMP fork/join
  // on threads that are usually still hot from the last ATen op.
  for (const KernelInfo& info : cg->c_.c_code.kernels)
    cg->grains_.push_back(std::max<int64_t>(1, 16384 / std::max<int64_t>(1, info.work_per_row)));  // at the hints
  if (cg->c_.c_code.kernels.empty()) {
    cg->ready_.store(true, std::memory_order_release);  // nothing to build
  } else if (opts.build) {
    cg->load_kernels(opts);
  }
  return cg;
}

namespace {

// Libraries whose C compiler is still running, by cache key: a graph with the same code
// takes that build instead of starting another (it counts as a memory-cache hit).
std::unordered_map<std::string, std::shared_future<BuiltLibrary>>& builds_in_flight() {
  static auto* m = new std::unordered_map<std::string, std::shared_future<BuiltLibrary>>();
  return *m;
}

std::string join_units(const std::vector<std::string>& units) {
  if (units.size() == 1) return units[0];
  std::string all;
  for (size_t i = 0; i < units.size(); ++i) all += "/* translation unit " + std::to_string(i) + " */\n" + units[i];
  return all;
}

// Runs the C compiler on the units of a graph's source (codegen/c/units.h), installs the
// library in the disk cache (when there is one) and loads it. Throws, with the source and the compiler's output kept in a 0600 file,
// when the compiler fails.
BuiltLibrary build_library(const CCompiler& cc, const std::string& key, const std::vector<std::string>& units,
                           DiskCache* disk) {
  BuiltLibrary built;
  std::string out;
  if (disk) {
    out = disk->temp_path("so");
  } else {
    char tmpl[] = "/tmp/ember-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) throw std::runtime_error("ember: cannot create a temporary directory");
    out = std::string(d) + "/kernels.so";
  }
  CompileResult r = cc.compile_shared_object(units, out);
  built.compile_seconds = r.seconds;
  if (!r.ok) {
    // Keep what failed (the unit the compiler rejected, its line numbers as in the log)
    // where the user can read it (mode 0600, a fresh name).
    char path[] = "/tmp/ember-failed-XXXXXX.c";
    int fd = mkstemps(path, 2);
    std::string kept;
    if (fd >= 0) {
      std::string text = (r.failed_unit >= 0 ? units[r.failed_unit] : join_units(units)) +
                         "\n/* compiler output:\n" + r.log + "\n*/\n";
      bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ::close(fd);
      if (ok) kept = std::string(" (source and compiler output kept in ") + path + ")";
    }
    throw std::runtime_error("ember: the C compiler failed on the generated code" + kept + ":\n" + r.log);
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string path = out;
  if (disk) {
    if (auto installed = disk->install(key, "so", out)) path = *installed;
  }
  std::string err;
  built.library = SharedLibrary::open(path, &err);
  if (!built.library) throw std::runtime_error("ember: cannot load compiled kernels: " + err);
  built.load_seconds = seconds_since(t0);
  return built;
}

// The build of `source`'s library: run now (the returned future is ready, holding the
// library or the error), or on a thread of its own, registered in builds_in_flight()
// until it ends. Either way a successful build enters the memory cache.
std::shared_future<BuiltLibrary> start_build(const std::string& key, std::vector<std::string> units,
                                             std::unique_ptr<DiskCache> disk, bool background) {
  count(Target::CPU, CompileEvent::CompilerRun);
  std::packaged_task<BuiltLibrary()> task(
      [cc = compiler(), key, units = std::move(units), disk = std::shared_ptr<DiskCache>(std::move(disk)), background] {
        auto forget = [&] {
          if (!background) return;
          std::lock_guard<std::mutex> lock(g_memory_cache_mutex);
          builds_in_flight().erase(key);
        };
        BuiltLibrary built;
        try {
          built = build_library(cc, key, units, disk.get());
        } catch (...) {
          forget();
          throw;
        }
        std::lock_guard<std::mutex> lock(g_memory_cache_mutex);
        memory_cache()[key] = built.library;
        if (background) builds_in_flight().erase(key);
        return built;
      });
  std::shared_future<BuiltLibrary> result = task.get_future().share();
  if (!background) {
    task();
    return result;
  }
  {
    // Registered before the thread starts, so that its erase always comes after.
    std::lock_guard<std::mutex> lock(g_memory_cache_mutex);
    builds_in_flight()[key] = result;
  }
  // Detached: the future keeps the result; ~CompiledGraph waits for a build it started.
  std::thread(std::move(task)).detach();
  return result;
}

}  // namespace

void CompiledGraph::load_kernels(const CompileOptions& opts) {
  // The disk cache first: it keeps the compiler's probe (runtime/compiler_memo.h).
  std::string disk_note;
  std::unique_ptr<DiskCache> disk = open_disk_cache(opts, &disk_note);
  key_ = sha256_hex(c_.c_code.source + "\n/* ember " EMBER_VERSION " */\n" + compiler_identity(compiler(), disk.get()));
  auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(g_memory_cache_mutex);
    auto it = memory_cache().find(key_);
    if (it != memory_cache().end()) library_ = it->second.lock();
    if (!library_) {
      auto in_flight = builds_in_flight().find(key_);
      if (in_flight != builds_in_flight().end()) build_ = in_flight->second;
    }
  }
  if (library_ || build_.valid()) {
    cache_status_ = "memory";
    count(Target::CPU, CompileEvent::MemoryHit);
  } else {
    std::string err;
    cache_note_ = disk_note;
    if (disk) {
      if (auto path = disk->lookup(key_, "so")) {
        library_ = SharedLibrary::open(*path, &err);
        if (library_) {
          cache_status_ = "disk";
          count(Target::CPU, CompileEvent::DiskHit);
        }
      }
    }
    if (library_) {
      std::lock_guard<std::mutex> lock(g_memory_cache_mutex);
      memory_cache()[key_] = library_;
    } else {
      cache_status_ = "miss";
      build_ = start_build(key_, split_units(c_.c_code, unit_count(c_.c_code, available_cores())), std::move(disk),
                           opts.background);
    }
  }
  c_.times.load = seconds_since(t0);
  if (library_) {
    resolve_kernels();
    ready_.store(true, std::memory_order_release);
  } else if (!opts.background) {
    wait_kernels();  // a failed build throws here, from compile()
  }
}

void CompiledGraph::wait_kernels() {
  if (kernels_ready()) return;
  std::lock_guard<std::mutex> lock(wait_mutex_);
  if (kernels_ready()) return;
  if (!build_.valid()) throw std::logic_error("ember: this graph was compiled without building its kernels");
  const BuiltLibrary& built = build_.get();  // rethrows the build's error
  library_ = built.library;
  c_.times.compile = built.compile_seconds;
  c_.times.load += built.load_seconds;
  resolve_kernels();
  ready_.store(true, std::memory_order_release);
}

void CompiledGraph::resolve_kernels() {
  fns_.clear();
  for (const auto& k : c_.c_code.kernels) {
    void* sym = library_->symbol((k.function + "_launch").c_str());
    if (!sym) throw std::runtime_error("ember: kernel " + k.name + " missing from the compiled library");
    fns_.push_back(reinterpret_cast<LaunchFn>(sym));
  }
}

void CompiledGraph::run_step(int step, const std::vector<uintptr_t>& ptrs, const std::vector<int64_t>& symbols) {
  if (!kernels_ready()) wait_kernels();
  const ExecStep& st = kernel_step(step, ptrs.size(), symbols.size());
  // Kernels of a graph with symbols read their values after the buffers (sym[k]).
  const size_t extra = symbols.empty() ? 0 : 1;
  char* args[64];
  std::vector<char*> heap;
  for (size_t i = 0; i < st.kernels.size(); ++i) {
    int k = st.kernels[i];
    const auto& slots = c_.steps.arg_slots[step][i];
    char** a = args;
    if (slots.size() + extra > 64) {
      heap.resize(slots.size() + extra);
      a = heap.data();
    }
    for (size_t j = 0; j < slots.size(); ++j) a[j] = reinterpret_cast<char*>(ptrs[slots[j]]);
    if (extra) a[slots.size()] = reinterpret_cast<char*>(const_cast<int64_t*>(symbols.data()));
    const Dim& rows = c_.c_code.kernels[k].rows;
    fns_[k](rows.is_static() ? rows.hint() : eval_size(rows.expr(), symbols), grains_[k], a);
  }
}

}  // namespace ember
