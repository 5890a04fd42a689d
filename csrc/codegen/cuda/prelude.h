#pragma once
#include <string>

namespace ember {

// The text every generated CUDA file starts with. It gives the names the shared C
// expression printer (CEmitter) uses -- fixed-width integer types, INFINITY/NAN, the
// f16/bf16 conversions, Python-style integer division, NaN-propagating max/min -- their
// device definitions, plus the warp and block reductions. Needs no CUDA header, so
// NVRTC compiles it with no include path.
const std::string& cuda_prelude();

}  // namespace ember
