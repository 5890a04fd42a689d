// max-autotune for CUDA graphs. Per kernel function: the launch the rules chose and the
// variants worth timing (codegen/cuda/kernel.h: generate_cuda_variants), timed at the
// graph's first call on that call's own buffers, the fastest kept. Decisions are cached
// in memory and in the disk cache, keyed by the kernels' code and the device, so a warm
// start times nothing and compiles only the winners.
//
// Timing never writes a buffer the graph reads or returns: a candidate's stores go to a
// scratch area (one slice per stored buffer), its loads read the call's real inputs, so
// index loads see the real indices. Each kernel's stores are its own outputs (an input
// mutated in place is a copy AOTAutograd makes after the graph), and a store the kernel
// later reads back lands in the same slice, so every candidate runs the program it would
// run, on the same data, minus the effect.
#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "jit/nvrtc.h"
#include "runtime/cubin_parts.h"
#include "runtime/cuda_compiled_graph.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"

namespace ember {

namespace {

constexpr const char* kDecisionFormat = "ember-tune-v1";
// Per candidate: launches to warm it (caches, clocks), then the best of a few rounds of a
// few launches in a row (a kernel of 2 us is then timed over 10 us of work; one of 500 us
// costs 10 ms: a model's ~30 functions x 4 candidates stay well under a second).
constexpr int kWarmups = 2;
constexpr int kRounds = 3;
constexpr int kLaunchesPerRound = 5;
constexpr int64_t kScratchAlign = 256;

std::mutex g_decisions_mutex;
std::unordered_map<std::string, std::string>& decision_cache() {
  static auto* m = new std::unordered_map<std::string, std::string>();
  return *m;
}

// The choice cached for `key`: from this process's memory, else from the disk cache.
std::optional<std::string> lookup_decision(const std::string& key, DiskCache* disk) {
  {
    std::lock_guard<std::mutex> lock(g_decisions_mutex);
    auto it = decision_cache().find(key);
    if (it != decision_cache().end()) return it->second;
  }
  if (!disk) return std::nullopt;
  auto path = disk->lookup(key, "tune");
  if (!path) return std::nullopt;
  std::ifstream f(*path);
  std::string format, choice;
  if (!std::getline(f, format) || format != kDecisionFormat || !std::getline(f, choice)) return std::nullopt;
  std::lock_guard<std::mutex> lock(g_decisions_mutex);
  decision_cache()[key] = choice;
  return choice;
}

void store_decision(const std::string& key, const std::string& choice, DiskCache* disk) {
  {
    std::lock_guard<std::mutex> lock(g_decisions_mutex);
    decision_cache()[key] = choice;
  }
  if (!disk) return;
  std::string tmp = disk->temp_path("tune");
  {
    std::ofstream f(tmp, std::ios::binary);
    f << kDecisionFormat << "\n" << choice << "\n";
  }
  if (!disk->install(key, "tune", tmp)) std::remove(tmp.c_str());
}

int64_t aligned(int64_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

int64_t stored_bytes(const Program& p, int buffer) {
  const Buffer& b = p.buffers[buffer];
  return b.extent().hint() * dtype_size(b.dtype);
}

// The scratch a kernel's stores take when they are redirected (one aligned slice each).
int64_t scratch_of(const Program& p, const CudaKernelInfo& info) {
  int64_t total = 0;
  for (int b : info.writes) total += aligned(stored_bytes(p, b));
  return total;
}

}  // namespace

int64_t CudaCompiledGraph::prepare_autotune(const std::string& tag) {
  std::lock_guard<std::mutex> lock(tuning_mutex_);
  if (opts_.device >= 0 && !modules_.empty() && c_.graph.symbols.empty() && tunings_.empty()) {
    std::string why;
    const Nvrtc* nvrtc = Nvrtc::load(opts_.nvrtc_dirs, &why);
    if (!nvrtc) throw std::runtime_error("ember: " + why);
    const std::string salt = cubin_salt(*nvrtc, opts_.arch);
    std::unique_ptr<DiskCache> disk = open_disk_cache(opts_, nullptr);
    // Candidates whose cubins are needed: every variant of an undecided function, the
    // winner of a decided one (when not the default, which is loaded already).
    std::vector<CubinPart> parts;
    std::vector<std::pair<size_t, int>> part_of;  // (tuning, candidate)
    std::vector<std::optional<int>> cached;
    for (size_t k = 0; k < c_.cuda_code.kernels.size(); ++k) {
      const CudaKernelInfo& info = c_.cuda_code.kernels[k];
      if (info.function != info.name) continue;
      std::vector<CudaKernelVariant> variants =
          generate_cuda_variants(c_.program, c_.schedule, c_.cuda_schedule, static_cast<int>(k));
      if (variants.empty()) continue;
      Tuning t;
      t.owner = static_cast<int>(k);
      t.choices = {"default"};
      t.infos = {info};
      t.fns = {fns_[k]};
      std::string identity = std::string(kDecisionFormat) + "\n" + tag + "\n" + salt + "\n" + c_.cuda_code.kernel_sources[k];
      for (auto& v : variants) {
        identity += "\n/* " + v.choice_text + " */\n" + v.source;
        t.choices.push_back(v.choice_text);
        t.infos.push_back(std::move(v.info));
        t.fns.push_back(nullptr);
      }
      t.key = sha256_hex(identity);
      std::optional<int> chosen;
      if (auto choice = lookup_decision(t.key, disk.get())) {
        auto at = std::find(t.choices.begin(), t.choices.end(), *choice);
        if (at != t.choices.end()) chosen = static_cast<int>(at - t.choices.begin());
      }
      for (size_t c = 1; c < variants.size() + 1; ++c) {
        if (chosen && *chosen != static_cast<int>(c)) continue;
        CubinPart part;
        part.source = c_.cuda_code.prelude + variants[c - 1].source;
        part.key = sha256_hex(part.source + salt);
        parts.push_back(std::move(part));
        part_of.push_back({tunings_.size(), static_cast<int>(c)});
      }
      cached.push_back(chosen);
      tunings_.push_back(std::move(t));
    }
    std::vector<CubinPart*> todo;
    for (auto& p : parts) todo.push_back(&p);
    if (!todo.empty()) {
      CubinFetch fetched = fetch_cubins(todo, *nvrtc, opts_.arch, disk.get());
      c_.times.compile += fetched.nvrtc_wall;
      for (double s : fetched.nvrtc_seconds) nvrtc_seconds_.push_back(s);
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      auto [ti, c] = part_of[i];
      std::shared_ptr<CudaModule> module = load_module(parts[i].key, parts[i].cubin, opts_.device);
      tunings_[ti].fns[c] = module->function(tunings_[ti].infos[c].name);
      modules_.push_back(std::move(module));
    }
    for (size_t ti = 0; ti < tunings_.size(); ++ti)
      if (cached[ti]) apply_choice(tunings_[ti], *cached[ti], {}, true);
  }
  // The scratch that timing the undecided functions needs: the largest of their kernels'.
  int64_t scratch = 0;
  for (const Tuning& t : tunings_) {
    if (t.decided) continue;
    for (const auto& info : c_.cuda_code.kernels)
      if (info.function == c_.cuda_code.kernels[t.owner].name) scratch = std::max(scratch, scratch_of(c_.program, info));
  }
  return scratch;
}

bool CudaCompiledGraph::autotune_pending() const {
  std::lock_guard<std::mutex> lock(tuning_mutex_);
  return std::any_of(tunings_.begin(), tunings_.end(), [](const Tuning& t) { return !t.decided; });
}

std::vector<AutotuneDecision> CudaCompiledGraph::autotune_decisions() const {
  std::lock_guard<std::mutex> lock(tuning_mutex_);
  return decisions_;
}

void CudaCompiledGraph::run_step_tuning(int step, const std::vector<uintptr_t>& ptrs, uintptr_t stream,
                                        uintptr_t scratch) {
  {
    std::lock_guard<std::mutex> lock(tuning_mutex_);
    const ExecStep& st = kernel_step(step, ptrs.size(), 0);  // tuning: static graphs only
    std::unique_ptr<DiskCache> disk;
    for (size_t i = 0; i < st.kernels.size(); ++i) {
      const int k = st.kernels[i];
      const CudaKernelInfo& info = c_.cuda_code.kernels[k];
      auto t = std::find_if(tunings_.begin(), tunings_.end(), [&](const Tuning& t) {
        return !t.decided && c_.cuda_code.kernels[t.owner].name == info.function;
      });
      if (t == tunings_.end()) continue;
      if (!disk) disk = open_disk_cache(opts_, nullptr);
      // The kernel's pointers in parameter order (the function's, shared or not), its
      // stores sent to slices of the scratch.
      const auto& slots = c_.steps.arg_slots[step][i];
      std::vector<uintptr_t> values(slots.size());
      std::vector<void*> params(slots.size());
      int64_t offset = 0;
      for (size_t j = 0; j < slots.size(); ++j) {
        const int b = info.args[j];
        if (std::binary_search(info.writes.begin(), info.writes.end(), b)) {
          values[j] = scratch + static_cast<uintptr_t>(offset);
          offset += aligned(stored_bytes(c_.program, b));
        } else {
          values[j] = ptrs[slots[j]];
        }
        params[j] = &values[j];
      }
      std::vector<double> us;
      for (size_t c = 0; c < t->fns.size(); ++c) {
        const CudaKernelInfo& cand = t->infos[c];
        const uint32_t grid = resident_grid(cand, t->fns[c]);
        if (grid == 0) {  // nothing to do at these sizes: every candidate is as fast
          us.push_back(0);
          continue;
        }
        for (int w = 0; w < kWarmups; ++w) modules_.front()->launch(t->fns[c], grid, cand.block, params.data(), stream);
        double best = std::numeric_limits<double>::infinity();
        for (int r = 0; r < kRounds; ++r)
          best = std::min(best, modules_.front()->time_launches(t->fns[c], grid, cand.block, params.data(), stream,
                                                                kLaunchesPerRound));
        us.push_back(best);
      }
      const int chosen = static_cast<int>(std::min_element(us.begin(), us.end()) - us.begin());
      store_decision(t->key, t->choices[chosen], disk.get());
      apply_choice(*t, chosen, std::move(us), false);
    }
  }
  run_step(step, ptrs, stream);
}

// Every kernel sharing the function runs the candidate from now on: its launch and
// function, with its own buffers.
void CudaCompiledGraph::apply_choice(Tuning& t, int candidate, std::vector<double> us, bool cached) {
  const std::string owner = c_.cuda_code.kernels[t.owner].name;
  for (size_t j = 0; j < c_.cuda_code.kernels.size(); ++j) {
    CudaKernelInfo& info = c_.cuda_code.kernels[j];
    if (info.function != owner) continue;
    CudaKernelInfo chosen = t.infos[candidate];
    chosen.name = info.name;
    chosen.function = owner;
    chosen.args = info.args;
    chosen.writes = info.writes;
    chosen.origins = info.origins;
    info = std::move(chosen);
    fns_[j] = t.fns[candidate];
    launch_grid_[j] = resident_grid(info, fns_[j]);
  }
  t.decided = true;
  decisions_.push_back({owner, t.choices, std::move(us), candidate, cached});
}

}  // namespace ember
