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

std::optional<std::vector<int64_t>> extern_input_layout(const Node& node, int arg_index, const std::vector<int64_t>& sizes,
                                                        const TensorType& eager) {
  if (is_2d_convolution(node) && (arg_index == 0 || arg_index == 1) && sizes.size() == 4)
    return channels_last_strides(sizes);
  // ember::sdpa_masked(q, k, v, mask, ...): SDPA picks its kernel at run time, from the mask's layout.
  if (node.op == "ember.sdpa_masked.default" && arg_index == 3) return sdpa_mask_strides(sizes, eager);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> extern_output_layout(const Node& node, int k) {
  if (is_2d_convolution(node) && k == 0) return channels_last_strides(node.outputs[0].sizes);
  return std::nullopt;
}

}  // namespace ember
