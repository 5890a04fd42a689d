#include "jit/nvrtc.h"

#include <dlfcn.h>

#include <climits>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace ember {

namespace {

// The few NVRTC declarations we use (nvrtc.h), so that no CUDA header is needed to build.
using nvrtcResult = int;
using nvrtcProgram = struct NvrtcProgramOpaque*;
constexpr nvrtcResult kNvrtcSuccess = 0;

}  // namespace

struct Nvrtc::Api {
  void* handle = nullptr;
  nvrtcResult (*version)(int*, int*) = nullptr;
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*destroy)(nvrtcProgram*) = nullptr;
  const char* (*error_string)(nvrtcResult) = nullptr;

  // Resolves every entry point; false (and the missing name in *why) if one is absent.
  bool bind(std::string* why) {
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (!fn && why->empty()) *why = std::string("missing symbol ") + name;
    };
    why->clear();
    get(version, "nvrtcVersion");
    get(create, "nvrtcCreateProgram");
    get(compile, "nvrtcCompileProgram");
    get(cubin_size, "nvrtcGetCUBINSize");
    get(cubin, "nvrtcGetCUBIN");
    get(log_size, "nvrtcGetProgramLogSize");
    get(log, "nvrtcGetProgramLog");
    get(destroy, "nvrtcDestroyProgram");
    get(error_string, "nvrtcGetErrorString");
    return why->empty();
  }
};

const Nvrtc* Nvrtc::load(const std::vector<std::string>& dirs, std::string* why) {
  static std::mutex mutex;
  static const Nvrtc* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return loaded;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("EMBER_NVRTC"); env && *env) candidates.push_back(env);
  static const char* kNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (const auto& d : dirs)
    for (const char* n : kNames) candidates.push_back(d + "/" + n);
  for (const char* n : kNames) candidates.push_back(n);
  std::string tried;
  for (const auto& c : candidates) {
    void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      // A path that does not exist is not worth reporting; a bare name that fails is.
      const char* e = ::dlerror();
      if (c.find('/') == std::string::npos || (e && std::string(e).find("No such file") == std::string::npos))
        tried += "\n  " + c + ": " + (e ? e : "dlopen failed");
      continue;
    }
    auto api = std::make_shared<Api>();
    api->handle = h;
    std::string missing;
    if (!api->bind(&missing)) {
      tried += "\n  " + c + ": " + missing;
      ::dlclose(h);
      continue;
    }
    auto* n = new Nvrtc();
    n->api_ = api;
    char resolved[4096];
    // dlinfo would give the real path; the symbol's object file is as good.
    Dl_info info;
    n->path_ = ::dladdr(reinterpret_cast<void*>(api->version), &info) && info.dli_fname
                   ? (::realpath(info.dli_fname, resolved) ? resolved : info.dli_fname)
                   : c;
    api->version(&n->major_, &n->minor_);
    // NVRTC dlopens its builtins library by soname at compile time, which the loader
    // finds only on its own search path; loaded here by full path from NVRTC's directory
    // (a pip package's lib/ is on no search path), that later dlopen finds it loaded.
    std::string dir = n->path_.substr(0, n->path_.rfind('/') + 1);
    std::string builtins = "libnvrtc-builtins.so." + std::to_string(n->major_) + "." + std::to_string(n->minor_);
    if (!dir.empty()) ::dlopen((dir + builtins).c_str(), RTLD_NOW | RTLD_GLOBAL);
    loaded = n;  // kept for the process's life: compiled modules never outlive it
    return loaded;
  }
  if (why) *why = "NVRTC (libnvrtc.so) could not be loaded; set EMBER_NVRTC or install nvidia-cuda-nvrtc" + tried;
  return nullptr;
}

std::vector<std::string> Nvrtc::options() {
  // No fast math: NaN and signed-zero semantics must match eager (as on CPU).
  // Contraction on (--fmad=true): ptxas fuses a mul.f32 into the add.f32 or sub.f32 that
  // takes it, one rounding where eager has two, within every tolerance except where the
  // sum is a deviation from a statistic: x * y - mean of one element is exactly 0 in eager
  // and fma(x, y, -mean) the product's rounding error, which var and layer_norm then
  // divide by 0 or multiply by 1 / sqrt(eps) (GPU fuzz seeds 1703, 24099, 25939). The CUDA
  // printer rounds those products itself (__fmul_rn: mul.rn.f32, which ptxas never fuses;
  // CEmitter::set_statistics). --fmad=false everywhere cost ResNet's BN + ReLU kernels
  // 1.6x on the H200 (32.6 vs 20.5 us, docs/benchmarks.md).
  return {"--std=c++17", "-default-device", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=true"};
}

std::string Nvrtc::identity() const {
  std::string id = "nvrtc " + std::to_string(major_) + "." + std::to_string(minor_) + " " + path_;
  for (const auto& o : options()) id += " " + o;
  return id;
}

CubinResult Nvrtc::compile(const std::string& source, const std::string& arch, const std::string& name) const {
  auto t0 = std::chrono::steady_clock::now();
  CubinResult r;
  auto done = [&]() {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = api_->create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != kNvrtcSuccess) {
    r.log = std::string("nvrtcCreateProgram: ") + api_->error_string(rc);
    return done();
  }
  std::vector<std::string> opts = options();
  opts.push_back("--gpu-architecture=" + arch);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  rc = api_->compile(prog, static_cast<int>(argv.size()), argv.data());
  size_t n = 0;
  if (api_->log_size(prog, &n) == kNvrtcSuccess && n > 1) {
    r.log.resize(n);
    api_->log(prog, r.log.data());
    r.log.resize(n - 1);  // the trailing NUL
  }
  if (rc != kNvrtcSuccess) {
    r.log = std::string("nvrtcCompileProgram: ") + api_->error_string(rc) + "\n" + r.log;
  } else if (api_->cubin_size(prog, &n) != kNvrtcSuccess || n == 0) {
    r.log += "\nno cubin was produced for " + arch + " (a virtual architecture such as compute_90 gives PTX only)";
  } else {
    r.cubin.resize(n);
    r.ok = api_->cubin(prog, r.cubin.data()) == kNvrtcSuccess;
  }
  api_->destroy(&prog);
  return done();
}

}  // namespace ember
