#include "lower/extern_layouts.h"

namespace ember {

namespace {

bool is_2d_convolution(const Node& n) {
  if (n.op != "aten.convolution.default" || n.args.size() < 9) return false;
  if (n.args[6].kind != Arg::Kind::Bool || n.args[6].b) return false;  // transposed
  const TensorType& out = n.outputs.at(0);
  return out.is_tensor && out.sizes.size() == 4 && out.dtype != DType::F64;
}

}  // namespace

bool has_2d_convolution(const Graph& g) {
  for (const auto& n : g.nodes)
    if (is_2d_convolution(n)) return true;
  return false;
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes) {
  // (N, C, H, W) -> strides (H*W*C, 1, W*C, C)
  int64_t c = std::max<int64_t>(sizes[1], 1), h = std::max<int64_t>(sizes[2], 1), w = std::max<int64_t>(sizes[3], 1);
  return {h * w * c, 1, w * c, c};
}

std::optional<std::vector<int64_t>> extern_input_layout(const Node& node, int arg_index, const std::vector<int64_t>& sizes) {
  if (is_2d_convolution(node) && (arg_index == 0 || arg_index == 1) && sizes.size() == 4)
    return channels_last_strides(sizes);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> extern_output_layout(const Node& node, int k) {
  if (is_2d_convolution(node) && k == 0) return channels_last_strides(node.outputs[0].sizes);
  return std::nullopt;
}

}  // namespace ember
