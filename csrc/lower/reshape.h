// Reshapes of lazy values (ops_view.cpp's view/reshape): an index remap instead of a copy
// where that is cheap, and storage in the pre-reshape shape where the value must be stored.
#pragma once
#include <optional>

#include "lower/lowering.h"

namespace ember {

// `in` (a lazy value) viewed as `shape` by remapping its index, or none when the reshape
// would divide the innermost index or the value is costly to compute again.
std::optional<TensorIR> lazy_reshape(LowerCtx& ctx, const TensorIR& in, const Dims& shape);

}  // namespace ember
