#include "runtime/cuda_compiled_graph.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "jit/nvrtc.h"
#include "lower/lowering.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"

#ifndef EMBER_VERSION
#define EMBER_VERSION "dev"
#endif

namespace ember {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct AtomicCounts {
  std::atomic<int64_t> graphs{0}, nvrtc_runs{0}, memory_cache_hits{0}, disk_cache_hits{0};
};
AtomicCounts& counts() {
  static AtomicCounts c;
  return c;
}

// Cubins by cache key, and loaded modules by (key, device): graphs with identical code
// share one module. Modules stay loaded for the process's life (cuda_driver.h).
std::mutex g_cache_mutex;
std::unordered_map<std::string, std::string>& cubin_cache() {
  static auto* m = new std::unordered_map<std::string, std::string>();
  return *m;
}
std::map<std::pair<std::string, int>, std::shared_ptr<CudaModule>>& module_cache() {
  static auto* m = new std::map<std::pair<std::string, int>, std::shared_ptr<CudaModule>>();
  return *m;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

}  // namespace

CudaCompileCounts cuda_compile_counts() {
  const AtomicCounts& c = counts();
  return {c.graphs.load(), c.nvrtc_runs.load(), c.memory_cache_hits.load(), c.disk_cache_hits.load()};
}

std::shared_ptr<CudaCompiledGraph> CudaCompiledGraph::compile(const std::string& graph_text,
                                                              const CudaCompileOptions& opts) {
  std::shared_ptr<CudaCompiledGraph> cg(new CudaCompiledGraph());
  ++counts().graphs;
  const bool dump = !opts.debug_dir.empty();
  auto after = [&](const char* pass, auto&& text) {
    if (dump) cg->passes_.push_back({pass, text()});
  };
  auto program_text = [&] { return cg->program_text(); };
  auto schedule_text = [&] { return cg->schedule_text(); };

  auto t0 = std::chrono::steady_clock::now();
  cg->graph_ = parse_graph(graph_text);
  cg->times_.parse = seconds_since(t0);
  after("parse_graph", [&] { return print_graph(cg->graph_); });

  t0 = std::chrono::steady_clock::now();
  cg->program_ = lower_graph(cg->graph_);
  after("lower_graph", program_text);
  eliminate_dead_code(cg->program_);
  cg->times_.lower = seconds_since(t0);
  after("eliminate_dead_code", program_text);

  t0 = std::chrono::steady_clock::now();
  FuseOptions fo;
  fo.enabled = opts.fuse;
  cg->schedule_ = fuse(cg->program_, fo);
  after("fuse", schedule_text);
  merge_inner_dims(cg->schedule_);
  cg->times_.schedule = seconds_since(t0);
  after("merge_inner_dims", schedule_text);

  t0 = std::chrono::steady_clock::now();
  cg->code_ = generate_cuda(cg->program_, cg->schedule_);
  cg->times_.codegen = seconds_since(t0);
  after("generate_cuda", [&] { return cg->code_.source; });

  cg->build_steps();
  cg->plan_memory();
  after("plan_arena", [&] { return cg->memory_plan_text(); });
  if (dump) {
    // Written before NVRTC runs, so that its failure leaves the source behind.
    for (size_t i = 0; i < cg->passes_.size(); ++i) {
      const PassDump& p = cg->passes_[i];
      const char* ext = p.pass == "generate_cuda" ? ".cu" : ".txt";
      write_file(opts.debug_dir + "/" + std::to_string(i) + "_" + p.pass + ext, p.text);
    }
  }
  if (!cg->code_.kernels.empty()) cg->compile_cubin(opts);
  return cg;
}

void CudaCompiledGraph::build_steps() {
  std::vector<std::vector<int>> kernel_args;
  for (const auto& k : code_.kernels) kernel_args.push_back(k.args);
  StepPlan plan = group_steps(schedule_, kernel_args);
  steps_ = std::move(plan.steps);
  arg_slots_ = std::move(plan.arg_slots);
}

// Kernels of one stream run in order, so a lifetime in steps is a lifetime on the device.
void CudaCompiledGraph::plan_memory() {
  arena_ = place_arena(arena_lifetimes(program_, steps_, code_.buffer_in_memory),
                       static_cast<int>(program_.buffers.size()), {});
}

void CudaCompiledGraph::compile_cubin(const CudaCompileOptions& opts) {
  std::string why;
  const Nvrtc* nvrtc = Nvrtc::load(opts.nvrtc_dirs, &why);
  if (!nvrtc) throw std::runtime_error("ember: " + why);
  key_ = sha256_hex(code_.source + "\n/* ember " EMBER_VERSION " */\n" + nvrtc->identity() + "\n" + opts.arch);
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = cubin_cache().find(key_);
    if (it != cubin_cache().end()) cubin_ = it->second;
  }
  if (!cubin_.empty()) {
    cache_status_ = "memory";
    ++counts().memory_cache_hits;
  } else {
    std::unique_ptr<DiskCache> disk;
    if (opts.disk_cache) {
      disk = std::make_unique<DiskCache>(opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir);
      if (!disk->usable()) {
        cache_note_ = disk->reason();
        disk.reset();
      }
    }
    if (disk) {
      // lookup() verifies the artifact's size and SHA-256 against its index entry.
      if (auto path = disk->lookup(key_, "cubin")) {
        cubin_ = read_file(*path);
        if (!cubin_.empty()) {
          cache_status_ = "disk";
          ++counts().disk_cache_hits;
        }
      }
    }
    if (cubin_.empty()) {
      ++counts().nvrtc_runs;
      CubinResult r = nvrtc->compile(code_.source, opts.arch, "ember_graph.cu");
      times_.compile = r.seconds;
      if (!r.ok) {
        // Keep what failed where the user can read it (mode 0600, a fresh name).
        char path[] = "/tmp/ember-failed-XXXXXX.cu";
        int fd = mkstemps(path, 3);
        std::string kept;
        if (fd >= 0) {
          std::string text = code_.source + "\n/* NVRTC output:\n" + r.log + "\n*/\n";
          bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
          ::close(fd);
          if (ok) kept = std::string(" (source and NVRTC output kept in ") + path + ")";
        }
        throw std::runtime_error("ember: NVRTC failed on the generated CUDA" + kept + ":\n" + r.log);
      }
      cubin_ = std::move(r.cubin);
      cache_status_ = "miss";
      if (disk) {
        std::string tmp = disk->temp_path("cubin");
        write_file(tmp, cubin_);
        if (!disk->install(key_, "cubin", tmp)) ::unlink(tmp.c_str());
      }
    }
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    cubin_cache()[key_] = cubin_;
  }
  if (opts.device >= 0) {
    auto tl = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(g_cache_mutex);
      auto& slot = module_cache()[{key_, opts.device}];
      if (!slot) slot = CudaModule::load(cubin_, opts.device);
      module_ = slot;
    }
    for (const auto& k : code_.kernels) fns_.push_back(module_->function(k.name));
    times_.load = seconds_since(tl);
  }
}

void CudaCompiledGraph::run_step(int step, const std::vector<uintptr_t>& ptrs, uintptr_t stream) const {
  const ExecStep& st = steps_.at(step);
  if (st.kind != ExecStep::Kind::Kernels) throw std::invalid_argument("step is not a kernel group");
  if (ptrs.size() != st.args.size()) throw std::invalid_argument("wrong number of buffer pointers");
  if (!module_) throw std::logic_error("ember: this CUDA graph was compiled without loading it on a device");
  std::vector<uintptr_t> values;
  std::vector<void*> params;
  for (size_t i = 0; i < st.kernels.size(); ++i) {
    const int k = st.kernels[i];
    const CudaKernelInfo& info = code_.kernels[k];
    if (info.grid == 0) continue;
    const auto& slots = arg_slots_[step][i];
    values.resize(slots.size());
    params.resize(slots.size());
    for (size_t j = 0; j < slots.size(); ++j) {
      values[j] = ptrs[slots[j]];
      params[j] = &values[j];
    }
    module_->launch(fns_[k], info.grid, info.block, params.data(), stream);
  }
}

std::string CudaCompiledGraph::memory_plan_text() const {
  std::ostringstream out;
  out << "arena " << arena_.arena_bytes << " bytes\n";
  for (size_t b = 0; b < arena_.offset.size(); ++b)
    if (arena_.offset[b] >= 0) out << "  buf" << b << " at " << arena_.offset[b] << "\n";
  for (const auto& k : code_.kernels)
    out << k.name << ": " << cuda_shape_name(k.shape) << " grid " << k.grid << " block " << k.block << "\n";
  return out.str();
}

std::string CudaCompiledGraph::program_text() const { return print_program(program_, graph_); }
std::string CudaCompiledGraph::schedule_text() const { return print_schedule(schedule_, program_, graph_); }

}  // namespace ember
