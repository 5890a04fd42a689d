#include "runtime/cuda_compiled_graph.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "jit/nvrtc.h"
#include "runtime/cubin_parts.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"

namespace ember {

std::shared_ptr<CudaCompiledGraph> CudaCompiledGraph::compile(const std::string& graph_text,
                                                              const CudaCompileOptions& opts) {
  std::shared_ptr<CudaCompiledGraph> cg(new CudaCompiledGraph());
  cg->run_pipeline_for(Target::CUDA, graph_text, opts);
  if (!cg->c_.cuda_code.kernels.empty() && opts.build) cg->compile_cubin(opts);
  return cg;
}

std::vector<CudaKernelVariant> CudaCompiledGraph::variants(int k) const {
  return generate_cuda_variants(c_.program, c_.schedule, c_.cuda_schedule, k);
}

void CudaCompiledGraph::compile_cubin(const CudaCompileOptions& opts) {
  opts_ = opts;
  std::string why;
  const Nvrtc* nvrtc = Nvrtc::load(opts.nvrtc_dirs, &why);
  if (!nvrtc) throw std::runtime_error("ember: " + why);
  std::vector<CubinPart> parts =
      split_parts(c_.cuda_code, cubin_salt(*nvrtc, opts.arch), static_cast<size_t>(std::max(1, opts.kernels_per_part)));
  std::string keys;
  for (const auto& p : parts) keys += p.key;
  key_ = sha256_hex(keys);

  std::unique_ptr<DiskCache> disk = open_disk_cache(opts, &cache_note_);
  std::vector<CubinPart*> all;
  for (auto& p : parts) all.push_back(&p);
  CubinFetch fetched = fetch_cubins(all, *nvrtc, opts.arch, disk.get());
  if (fetched.compiled > 0) {
    count(Target::CUDA, CompileEvent::CompilerRun);
    c_.times.compile = fetched.nvrtc_wall;
    nvrtc_seconds_ = std::move(fetched.nvrtc_seconds);
  }
  cache_status_ = fetched.compiled > 0 ? "miss" : fetched.from_disk > 0 ? "disk" : "memory";
  if (fetched.compiled == 0) count(Target::CUDA, fetched.from_disk > 0 ? CompileEvent::DiskHit : CompileEvent::MemoryHit);
  for (auto& p : parts) {
    cubins_.push_back(p.cubin);
    part_keys_.push_back(p.key);
  }

  if (opts.device >= 0) {
    auto tl = std::chrono::steady_clock::now();
    fns_.resize(c_.cuda_code.kernels.size());
    partial_fns_.assign(c_.cuda_code.kernels.size(), nullptr);
    std::unordered_map<std::string, int> by_name;
    for (size_t k = 0; k < c_.cuda_code.kernels.size(); ++k) by_name.emplace(c_.cuda_code.kernels[k].name, static_cast<int>(k));
    for (size_t i = 0; i < parts.size(); ++i) {
      std::shared_ptr<CudaModule> module = load_module(parts[i].key, cubins_[i], opts.device);
      for (int k : parts[i].kernels) {
        fns_[k] = module->function(c_.cuda_code.kernels[k].name);
        if (c_.cuda_code.kernels[k].partial_grid > 0) partial_fns_[k] = module->function(c_.cuda_code.kernels[k].name + "_partial");
      }
      modules_.push_back(std::move(module));
    }
    for (size_t k = 0; k < c_.cuda_code.kernels.size(); ++k) {
      const int o = by_name.at(c_.cuda_code.kernels[k].function);
      fns_[k] = fns_[o];
      partial_fns_[k] = partial_fns_[o];
    }
    launch_grid_.resize(c_.cuda_code.kernels.size());
    for (size_t k = 0; k < c_.cuda_code.kernels.size(); ++k) launch_grid_[k] = resident_grid(c_.cuda_code.kernels[k], fns_[k]);
    c_.times.load = seconds_since(tl);
  }
}

// A hoisted kernel loops over its elements (grid-stride): launched with no more blocks
// than the SMs hold at once, every block runs from start to end, without a last, partly
// empty wave (ResNet's two-BatchNorm kernels: 79 registers, 3 blocks an SM, 1,024 blocks
// made 2.6 waves).
uint32_t CudaCompiledGraph::resident_grid(const CudaKernelInfo& info, void* fn) const {
  if (info.grid_multiple == 0 || !fn) return info.grid;
  const int sms = modules_.front()->multiprocessors();
  const int per_sm = modules_.front()->resources(fn, info.block).blocks_per_sm;
  if (sms <= 0 || per_sm <= 0) return info.grid;
  const int64_t resident = int64_t{sms} * per_sm / info.grid_multiple * info.grid_multiple;
  return resident >= info.grid_multiple && resident < info.grid ? static_cast<uint32_t>(resident) : info.grid;
}

namespace {

// Blocks a kernel of a graph with symbols runs on at these symbol values (CudaKernelInfo::grid_units).
uint32_t grid_at(const CudaKernelInfo& info, const std::vector<int64_t>& symbols) {
  const int64_t units = eval_dim(info.grid_units, symbols);
  if (units <= 0) return 0;
  int64_t blocks = (units + info.grid_per_block - 1) / info.grid_per_block;
  if (info.grid_cap > 0) blocks = std::min(blocks, info.grid_cap);
  if (blocks > 0x7fffffff)
    throw std::runtime_error("ember: kernel " + info.name + " needs " + std::to_string(blocks) +
                             " blocks at these sizes, more than a CUDA grid holds");
  return static_cast<uint32_t>(blocks);
}

}  // namespace

void CudaCompiledGraph::run_step(int step, const std::vector<uintptr_t>& ptrs, uintptr_t stream,
                                 const std::vector<int64_t>& symbols) const {
  const ExecStep& st = kernel_step(step, ptrs.size(), symbols.size());
  if (modules_.empty()) throw std::logic_error("ember: this CUDA graph was compiled without loading it on a device");
  const bool symbolic = !c_.graph.symbols.empty();
  // The kernels' last parameter in a graph with symbols (ember_syms in the prelude).
  int64_t syms[kMaxCudaSymbols] = {};
  for (size_t i = 0; i < symbols.size() && i < static_cast<size_t>(kMaxCudaSymbols); ++i) syms[i] = symbols[i];
  std::vector<uintptr_t> values;
  std::vector<void*> params;
  for (size_t i = 0; i < st.kernels.size(); ++i) {
    const int k = st.kernels[i];
    const CudaKernelInfo& info = c_.cuda_code.kernels[k];
    const uint32_t grid = info.grid_per_block > 0 ? grid_at(info, symbols) : launch_grid_[k];
    if (grid == 0) continue;
    const auto& slots = c_.steps.arg_slots[step][i];
    values.resize(slots.size());
    params.resize(slots.size());
    for (size_t j = 0; j < slots.size(); ++j) {
      values[j] = ptrs[slots[j]];
      params[j] = &values[j];
    }
    if (symbolic) params.push_back(syms);
    // Every part is loaded in the device's primary context: any of them launches any kernel.
    if (info.partial_grid > 0)
      modules_.front()->launch(partial_fns_[k], info.partial_grid, info.partial_block, params.data(), stream);
    modules_.front()->launch(fns_[k], grid, info.block, params.data(), stream);
  }
}

uint32_t CudaCompiledGraph::launch_grid(int k) const {
  return static_cast<size_t>(k) < launch_grid_.size() ? launch_grid_[k] : c_.cuda_code.kernels.at(k).grid;
}

std::vector<std::pair<int, int>> CudaCompiledGraph::kernel_resources() const {
  std::vector<std::pair<int, int>> out(c_.cuda_code.kernels.size(), {-1, -1});
  if (modules_.empty()) return out;
  for (size_t k = 0; k < c_.cuda_code.kernels.size() && k < fns_.size(); ++k) {
    if (!fns_[k]) continue;
    CudaModule::Resources r = modules_.front()->resources(fns_[k], c_.cuda_code.kernels[k].block);
    out[k] = {r.registers, r.blocks_per_sm};
  }
  return out;
}

}  // namespace ember
