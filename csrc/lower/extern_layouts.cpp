#include "lower/extern_layouts.h"

#include <algorithm>

namespace ember {

namespace {

bool is_2d_convolution(const Node& n) {
  if (n.op != "aten.convolution.default" || n.args.size() < 9) return false;
  if (n.args[6].kind != Arg::Kind::Bool || n.args[6].b) return false;  // transposed
  const TensorType& out = n.outputs.at(0);
  return out.is_tensor && out.sizes.size() == 4 && out.dtype != DType::F64;
}

// The backward of such a convolution: (grad_output, input, weight, bias_sizes, stride,
// padding, dilation, transposed, output_padding, groups, output_mask) -> (grad_input,
// grad_weight, grad_bias). Fed channels-last, ATen returns grad_input and grad_weight
// channels-last (cuDNN and oneDNN pick the layout from the input and the weight); fed NCHW
// while the forward ran channels-last, cuDNN transposes every operand on every call.
bool is_2d_convolution_backward(const Node& n) {
  if (n.op != "aten.convolution_backward.default" || n.args.size() < 11) return false;
  if (n.args[7].kind != Arg::Kind::Bool || n.args[7].b) return false;  // transposed
  if (n.outputs.size() != 3) return false;
  for (int k = 0; k < 2; ++k) {  // grad_input or grad_weight, whichever the mask asks for
    const TensorType& grad = n.outputs[k];
    if (grad.is_tensor) return grad.sizes.size() == 4 && grad.dtype != DType::F64;
  }
  return false;
}

}  // namespace

bool has_2d_convolution(const Graph& g) {
  for (const auto& n : g.nodes)
    if (is_2d_convolution(n) || is_2d_convolution_backward(n)) return true;
  return false;
}

bool convolutions_lead_the_layout(const Graph& g) {
  size_t convolutions = 0;
  for (const auto& n : g.nodes)
    if (is_2d_convolution(n) || is_2d_convolution_backward(n)) ++convolutions;
  return convolutions > 0 && g.nodes.size() < kNodesPerConvolution * convolutions;
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes) {
  // (N, C, H, W) -> strides (H*W*C, 1, W*C, C)
  int64_t c = std::max<int64_t>(sizes[1], 1), h = std::max<int64_t>(sizes[2], 1), w = std::max<int64_t>(sizes[3], 1);
  return {h * w * c, 1, w * c, c};
}

namespace {

// An attention mask as SDPA's fused kernels (cuDNN, memory-efficient) take it: the last dim
// contiguous, rows starting every kAttentionMaskAlignment elements, the dims eager
// broadcasts (stride 0) still broadcast. A mask whose last dim is strided (T5's relative
// position bias, permuted from [q, k, heads]; BERT's padding mask expanded over the query
// rows) sends SDPA to its math path, a dozen ATen kernels over [b, h, q, k] scores.
std::optional<std::vector<int64_t>> sdpa_mask_strides(const std::vector<int64_t>& sizes, const TensorType& eager) {
  const size_t rank = sizes.size();
  if (rank < 2 || eager.opaque || eager.strides.size() != rank || sizes[rank - 1] < 2) return std::nullopt;
  std::vector<int64_t> strides(rank, 0);
  int64_t step = 1;
  for (size_t k = rank; k-- > 0;) {
    if (sizes[k] > 1 && eager.strides[k] == 0 && k + 1 < rank) continue;  // broadcast: stays 0
    strides[k] = step;
    int64_t span = sizes[k];
    if (k == rank - 1) span = (span + kAttentionMaskAlignment - 1) / kAttentionMaskAlignment * kAttentionMaskAlignment;
    step *= std::max<int64_t>(span, 1);
  }
  if (strides == eager.strides) return std::nullopt;
  return strides;
}

}  // namespace

std::optional<std::vector<int64_t>> eager_broadcast_layout(const std::vector<int64_t>& sizes, const TensorType& eager) {
  const size_t rank = sizes.size();
  if (eager.opaque || eager.strides.size() != rank) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> kept;  // (stride, size) of the dims eager does not broadcast
  bool broadcast = false;
  for (size_t d = 0; d < rank; ++d) {
    if (eager.strides[d] < 0) return std::nullopt;
    if (sizes[d] <= 1) continue;
    if (eager.strides[d] == 0)
      broadcast = true;
    else
      kept.emplace_back(eager.strides[d], sizes[d]);
  }
  if (!broadcast) return std::nullopt;
  std::sort(kept.begin(), kept.end());
  int64_t extent = 1;  // elements the dims so far span
  for (const auto& [stride, size] : kept) {
    if (stride < extent) return std::nullopt;  // overlapping: not a layout to store in
    extent = stride * size;
  }
  return eager.strides;
}

bool has_attention_layout_rules(const Node& node) {
  static const char* const ops[] = {"aten._scaled_dot_product_efficient_attention.", "aten._scaled_dot_product_flash_attention.",
                                    "aten._scaled_dot_product_cudnn_attention.", "aten._efficient_attention_forward.",
                                    "aten._flash_attention_forward.", "ember.sdpa_masked."};
  for (const char* op : ops)
    if (node.op.rfind(op, 0) == 0) return true;
  return false;
}

bool meets_attention_layout_rules(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
                                  DType dtype) {
  const size_t rank = sizes.size();
  if (rank < 2 || strides.size() != rank) return true;  // scalars, vectors: nothing to align
  const int64_t align = std::max<int64_t>(16 / dtype_size(dtype), 1);
  if (sizes[rank - 1] > 1 && strides[rank - 1] != 1) return false;
  for (size_t d = 0; d + 1 < rank; ++d)
    if (sizes[d] > 1 && strides[d] % align != 0) return false;
  return offset % align == 0;
}

std::vector<int64_t> attention_operand_strides(const std::vector<int64_t>& sizes, const TensorType& eager) {
  if (eager.strides.size() == sizes.size() && meets_attention_layout_rules(sizes, eager.strides, 0, eager.dtype))
    return eager.strides;
  if (auto aligned = sdpa_mask_strides(sizes, eager)) return *aligned;
  std::vector<int64_t> strides(sizes.size(), 1);  // contiguous, the last dim padded
  int64_t step = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    strides[k] = step;
    int64_t span = sizes[k];
    if (k + 1 == sizes.size()) span = (span + kAttentionMaskAlignment - 1) / kAttentionMaskAlignment * kAttentionMaskAlignment;
    step *= std::max<int64_t>(span, 1);
  }
  return strides;
}

std::optional<std::vector<int64_t>> extern_input_layout(const Node& node, int arg_index, const std::vector<int64_t>& sizes,
                                                        const TensorType& eager) {
  if (is_2d_convolution(node) && (arg_index == 0 || arg_index == 1) && sizes.size() == 4)
    return channels_last_strides(sizes);
  if (is_2d_convolution_backward(node) && arg_index <= 2 && sizes.size() == 4) return channels_last_strides(sizes);
  // ember::sdpa_masked(q, k, v, mask, ...): SDPA picks its kernel at run time, from the mask's layout.
  if (node.op == "ember.sdpa_masked.default" && arg_index == 3) return sdpa_mask_strides(sizes, eager);
  return std::nullopt;
}

bool preparable_weight(const Node& node, int arg_index, const std::optional<StridedView>& view, const Program& p) {
  return arg_index == 1 && is_2d_convolution(node) && view && p.is_whole_input(*view);
}

std::optional<std::vector<int64_t>> extern_output_layout(const Node& node, int k) {
  if (is_2d_convolution(node) && k == 0) return channels_last_strides(node.outputs[0].sizes);
  if (is_2d_convolution_backward(node) && k <= 1 && node.outputs[k].is_tensor && node.outputs[k].sizes.size() == 4)
    return channels_last_strides(node.outputs[k].sizes);
  return std::nullopt;
}

}  // namespace ember
