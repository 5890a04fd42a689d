// The layout a later copy asks of a value.
//
// Eager gives an element-wise op's result the layout of its first strided operand, so one
// permuted tensor early in a model can leave a whole residual stream transposed: Whisper's
// encoder adds its positions to the permuted convolution output, and every later residual
// add follows that layout, while each LayerNorm starts with a `clone(contiguous_format)`
// of the stream. Stored as eager has it, each LayerNorm reduces over a dim 1,500 elements
// apart (a column reduction on 16 blocks, 87 us on an H200 where 25 MB take 7) and each
// residual add is a transposing copy. Where no copy would remain if the value were stored
// in the layout its copies ask for, it is stored so: the copies become plain reads.
//
// A value's request comes from the copies that read it (clone, _to_copy,
// convert_element_type, lift_fresh_copy) with the same sizes: an explicit memory format
// asks for the copy's own strides; a copy that preserves the format passes on what its
// own readers ask. Readers that disagree cancel the request. Graph outputs keep the
// strides the graph declares whatever is asked (lowering realizes them so).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace ember {

// Per node and output, the strides its copies ask for when they differ from the node's
// own (eager's), else empty. Static, dense values only; empty for graphs with symbols.
std::vector<std::vector<std::vector<int64_t>>> copy_requested_strides(const Graph& g);

}  // namespace ember
