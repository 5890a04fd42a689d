// The NVRTC programs of CUDA code and where their cubins come from: the process's memory
// cache, the disk cache, or NVRTC, run on threads of its own for the programs that miss
// both; and the modules those cubins load as, one per (program, device).
//
// NVRTC's time goes per kernel (50 to 400 ms each on an H100 host's core), and a model's
// graph has 8 to 30 distinct ones: a graph compiles in parts of `kernels_per_part`
// kernels, each with the prelude (~20 ms), on threads of their own. One kernel per part
// gave the shortest walls on a 16-core host (benchmarks/nvrtc_parts.py; docs/gpu.md).
// Parts are fixed runs of kernels, not a function of the machine's core count, so their
// cache keys are the same on every machine.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "jit/nvrtc.h"

namespace ember {

class CudaModule;
class DiskCache;

struct CubinPart {
  std::string source, key, cubin;  // key: SHA-256 of source and the salt
  std::vector<int> kernels;        // the kernels (of CudaCode::kernels) it holds
  CubinResult result;              // NVRTC's, when it ran
};

// What every part's key covers besides its source: ember's version, NVRTC's identity
// and the architecture.
std::string cubin_salt(const Nvrtc& nvrtc, const std::string& arch);

// Parts over the kernels with functions of their own (CudaKernelInfo::function == name).
std::vector<CubinPart> split_parts(const CudaCode& code, const std::string& salt, size_t kernels_per_part);

// Fills in every part's cubin: from memory, else from `disk` (may be null), else from
// NVRTC, all parts that need it at once; new cubins enter both caches. Throws
// std::runtime_error with NVRTC's log (and where the source was kept) for a failure.
struct CubinFetch {
  int from_memory = 0, from_disk = 0, compiled = 0;
  double nvrtc_wall = 0;               // seconds of the parallel NVRTC run, 0 when none
  std::vector<double> nvrtc_seconds;   // per compiled part
};
CubinFetch fetch_cubins(std::vector<CubinPart*> parts, const Nvrtc& nvrtc, const std::string& arch, DiskCache* disk);

// Puts `cubin` in the process's memory cache as part `key`: a precompiled artifact's
// cubins (their integrity checked by its loader), so that its graph loads them with no
// disk cache read, while they are written there too.
void seed_cubin(const std::string& key, std::string cubin);

// The module of part `key` on device `ordinal`, loaded once per process.
std::shared_ptr<CudaModule> load_module(const std::string& key, const std::string& cubin, int ordinal);

}  // namespace ember
