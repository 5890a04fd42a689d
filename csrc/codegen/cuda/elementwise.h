// The Elementwise shape's scalar loop: one thread per element of rows x inner (or per
// row, when every stage is per-row), grid-stride, each step taking launch.per_thread
// elements blockDim apart. The whole body when there is no vector path, and its
// fallback when there is one (vector_path.h).
#pragma once
#include <string>
#include <vector>

#include "codegen/cuda/printer.h"

namespace ember {

std::vector<std::string> elementwise_body(CudaPrinter& pr);

// A scatter-add kernel's first launch, <name>_partial (CudaKernelInfo::partial_grid): its
// target zeroed, a grid-stride loop over the buffer, before the adds.
std::string scatter_zeroing_kernel(CudaPrinter& pr);

}  // namespace ember
