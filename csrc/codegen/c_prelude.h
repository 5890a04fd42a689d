#pragma once
#include <string>

namespace ember {

// The text every generated C file starts with: includes, the f16/bf16
// conversions, Python-style integer division, and SIMD declarations of the libm
// functions glibc's libmvec vectorizes (so loops vectorize without -ffast-math,
// which would break PyTorch's NaN semantics).
const std::string& c_prelude();
// The arithmetic helpers both the C and the CUDA prelude contain (max/min, integer
// and float division and remainder); each prelude defines EMBER_FN before them.
const std::string& prelude_arithmetic();

}  // namespace ember
