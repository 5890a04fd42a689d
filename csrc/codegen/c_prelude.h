#pragma once
#include <string>

namespace ember {

// The text every generated C file starts with: includes, the f16/bf16
// conversions, Python-style integer division, and SIMD declarations of the libm
// functions glibc's libmvec vectorizes (so loops vectorize without -ffast-math,
// which would break PyTorch's NaN semantics).
const std::string& c_prelude();
// The arithmetic helpers both the C and the CUDA prelude contain (integer and float
// division and remainder); each prelude defines EMBER_FN before them.
const std::string& prelude_arithmetic();
// The C prelude's f32 and f64 max/min: NaN-propagating, the first operand winning a tie
// of zeros, as ATen's CPU kernels. The CUDA prelude has its own (codegen/cuda/prelude.cpp):
// ATen's CUDA kernels order -0.0 below +0.0.
const std::string& prelude_minmax_f32();
const std::string& prelude_minmax_f64();
// The C prelude's ember_max2_f32 / ember_min2_f32 (what the emitter prints for two
// computed operands): the same selects; the CUDA prelude has its own (codegen/cuda/prelude.cpp).
const std::string& prelude_minmax2_f32();

}  // namespace ember
