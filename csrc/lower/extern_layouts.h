#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ember {

// Layout choices for extern ops whose ATen kernels run faster on another layout
// than eager's default. oneDNN convolutions are much faster on channels_last
// (NHWC) than on NCHW, which it reorders internally on every call; TorchInductor
// converts conv graphs to channels_last for the same reason.

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes);

// Strides to give tensor argument `arg_index` of `node`, or nullopt for "as is". `eager`
// is the argument's type as eager laid it out. A stride of 0 on a dim of size > 1 keeps
// that dim broadcast: the value is stored once along it (lower_extern stores the
// compact value and passes the extern a view that expands it).
std::optional<std::vector<int64_t>> extern_input_layout(const Node& node, int arg_index, const std::vector<int64_t>& sizes,
                                                        const TensorType& eager);

// Elements an attention mask's rows are aligned to (sdpa_mask_strides).
constexpr int64_t kAttentionMaskAlignment = 16;

// Whether the graph has a 2-D convolution that the layouts above apply to.
bool has_2d_convolution(const Graph& g);

// The strides ATen will produce for output `k` when the inputs have the layouts
// chosen above, or nullopt when they are eager's (node.outputs[k].strides).
std::optional<std::vector<int64_t>> extern_output_layout(const Node& node, int k);

}  // namespace ember
