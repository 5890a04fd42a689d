// NVRTC for the CUDA codegen tests: the generated source of a test compiles to a cubin where
// NVRTC is found ($EMBER_NVRTC_DIR, else the loader's path); without it the other checks
// of a test still run.
#pragma once
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "check.h"
#include "codegen/cuda/kernel.h"
#include "jit/nvrtc.h"

namespace ember_test {

inline const ember::Nvrtc* nvrtc() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("EMBER_NVRTC_DIR"); d && *d) dirs.push_back(d);
  std::string why;
  return ember::Nvrtc::load(dirs, &why);
}

inline void check_compiles(const ember::CudaCode& code) {
  const ember::Nvrtc* n = nvrtc();
  if (!n) return;
  ember::CubinResult r = n->compile(code.source, "sm_90", "test.cu");
  CHECK(r.ok);
  if (!r.ok) std::cerr << r.log << "\n" << code.source;
  CHECK(r.cubin.size() > 4 && r.cubin.compare(0, 4, "\x7f" "ELF") == 0);
}

}  // namespace ember_test
