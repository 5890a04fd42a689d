#include "runtime/cubin_parts.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"

#ifndef EMBER_VERSION
#define EMBER_VERSION "dev"
#endif

namespace ember {

namespace {

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

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// Runs NVRTC on every part in `todo`, on up to hardware_concurrency() threads.
void compile_parts(const Nvrtc& nvrtc, std::vector<CubinPart*>& todo, const std::string& arch) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++)
      todo[i]->result = nvrtc.compile(todo[i]->source, arch, "ember_graph.cu");
  };
  size_t n = std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
}

[[noreturn]] void throw_nvrtc_failure(const CubinPart& part) {
  // Keep what failed where the user can read it (mode 0600, a fresh name).
  char path[] = "/tmp/ember-failed-XXXXXX.cu";
  int fd = mkstemps(path, 3);
  std::string kept;
  if (fd >= 0) {
    std::string text = part.source + "\n/* NVRTC output:\n" + part.result.log + "\n*/\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (ok) kept = std::string(" (source and NVRTC output kept in ") + path + ")";
  }
  throw std::runtime_error("ember: NVRTC failed on the generated CUDA" + kept + ":\n" + part.result.log);
}

}  // namespace

std::string cubin_salt(const Nvrtc& nvrtc, const std::string& arch) {
  return "\n/* ember " EMBER_VERSION " */\n" + nvrtc.identity() + "\n" + arch;
}

std::vector<CubinPart> split_parts(const CudaCode& code, const std::string& salt, size_t kernels_per_part) {
  std::vector<CubinPart> parts;
  size_t own = 0;
  for (size_t k = 0; k < code.kernels.size(); ++k) {
    if (code.kernels[k].function != code.kernels[k].name) continue;
    if (own++ % kernels_per_part == 0) parts.push_back({code.prelude, "", "", {}, {}});
    parts.back().source += code.kernel_sources[k];
    parts.back().kernels.push_back(static_cast<int>(k));
  }
  for (auto& p : parts) p.key = sha256_hex(p.source + salt);
  return parts;
}

CubinFetch fetch_cubins(std::vector<CubinPart*> parts, const Nvrtc& nvrtc, const std::string& arch, DiskCache* disk) {
  CubinFetch out;
  std::vector<CubinPart*> todo;
  for (CubinPart* p : parts) {
    {
      std::lock_guard<std::mutex> lock(g_cache_mutex);
      auto it = cubin_cache().find(p->key);
      if (it != cubin_cache().end()) p->cubin = it->second;
    }
    if (!p->cubin.empty()) {
      ++out.from_memory;
      continue;
    }
    // lookup() verifies the artifact's size and SHA-256 against its index entry.
    if (disk) {
      if (auto path = disk->lookup(p->key, "cubin")) p->cubin = read_file(*path);
    }
    if (!p->cubin.empty()) {
      ++out.from_disk;
    } else {
      todo.push_back(p);
    }
  }
  if (!todo.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    compile_parts(nvrtc, todo, arch);
    out.nvrtc_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.compiled = static_cast<int>(todo.size());
    for (CubinPart* p : todo) {
      out.nvrtc_seconds.push_back(p->result.seconds);
      if (!p->result.ok) throw_nvrtc_failure(*p);
      p->cubin = std::move(p->result.cubin);
      if (disk) {
        std::string tmp = disk->temp_path("cubin");
        write_file(tmp, p->cubin);
        if (!disk->install(p->key, "cubin", tmp)) ::unlink(tmp.c_str());
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  for (CubinPart* p : parts) cubin_cache()[p->key] = p->cubin;
  return out;
}

void seed_cubin(const std::string& key, std::string cubin) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  cubin_cache()[key] = std::move(cubin);
}

std::shared_ptr<CudaModule> load_module(const std::string& key, const std::string& cubin, int ordinal) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto& slot = module_cache()[{key, ordinal}];
  if (!slot) slot = CudaModule::load(cubin, ordinal);
  return slot;
}

}  // namespace ember
