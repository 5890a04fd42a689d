// NVRTC, the CUDA run-time compiler, loaded with dlopen: CUDA C source -> cubin.
//
// Nothing here needs a GPU or CUDA headers, so a CPU-only machine (CI) can compile
// generated CUDA to check it. The library is searched, in order, at:
//   $EMBER_NVRTC (a file path), the directories the caller passes (Python passes the
//   nvidia-cuda-nvrtc pip package's lib/), then the loader's own search for
//   libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.
// The first one that loads and has every entry point we use wins.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ember {

struct CubinResult {
  bool ok = false;
  std::string cubin;     // the ELF image, when ok
  std::string log;       // NVRTC's log (warnings when ok, the errors otherwise)
  double seconds = 0.0;
};

class Nvrtc {
 public:
  // The process-wide NVRTC, loaded on first call from the first usable candidate; nullptr
  // (with the places tried and why each failed in *why) when none is. Later calls with
  // other dirs return the library loaded first.
  static const Nvrtc* load(const std::vector<std::string>& dirs, std::string* why);

  const std::string& path() const { return path_; }  // the file that was loaded
  int major() const { return major_; }
  int minor() const { return minor_; }
  // "nvrtc 13.0 <path>": part of every cubin's cache key.
  std::string identity() const;

  // Compiles `source` for `arch` ("sm_90"): real machine code, no PTX left for the driver.
  // Never throws for a compile error: ok=false and the log say what failed.
  CubinResult compile(const std::string& source, const std::string& arch, const std::string& name) const;

  // The options compile() passes, besides --gpu-architecture (part of the identity).
  static std::vector<std::string> options();

 private:
  struct Api;
  Nvrtc() = default;
  std::string path_;
  int major_ = 0, minor_ = 0;
  std::shared_ptr<Api> api_;
};

}  // namespace ember
