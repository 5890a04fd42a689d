#pragma once
#include <string>

namespace ember {

// The text every generated C file starts with: includes, the f16/bf16
// conversions, Python-style integer division, and SIMD declarations of the libm
// functions glibc's libmvec vectorizes (so loops vectorize without -ffast-math,
// which would break PyTorch's NaN semantics).
const std::string& c_prelude();

}  // namespace ember
