#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/program.h"

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

// Eager's strides for an extern operand that eager broadcasts (a stride of 0 on a dim of
// size > 1, every stride non-negative, the other dims not overlapping), or nullopt. ATen
// decompositions pad and then expand a value for kernels with alignment rules (SDPA's
// memory-efficient and cuDNN kernels pad an attention bias's rows to 8 or 16 elements and
// expand it over the batch): materialized densely, the value would lose that alignment and
// the kernel would refuse it or fault. Stored compact in eager's strides, it keeps both.
std::optional<std::vector<int64_t>> eager_broadcast_layout(const std::vector<int64_t>& sizes, const TensorType& eager);

// ATen's fused attention kernels (memory-efficient, flash, cuDNN; ember::sdpa_masked, which
// picks one at run time) check their operands' layout when they run: the last dim
// contiguous, the other strides and the start 16-byte aligned. The decomposition that chose
// the kernel made eager's layout meet those rules; a value ember already holds in memory in
// another layout (stored once for an earlier user) must be stored again for the call.
bool has_attention_layout_rules(const Node& node);
bool meets_attention_layout_rules(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
                                  DType dtype);
// The layout to store such an operand in: eager's where it meets the rules, else rows
// aligned as for a mask (sdpa_mask_strides), eager's broadcast dims kept.
std::vector<int64_t> attention_operand_strides(const std::vector<int64_t>& sizes, const TensorType& eager);

// Whether tensor argument `arg_index` of `node`, stored as `view`, is a weight the runtime
// prepares once (LowerOptions::prepared_weights): a 2-D convolution's weight that is a
// graph input as the caller passes it (no view of it).
bool preparable_weight(const Node& node, int arg_index, const std::optional<StridedView>& view, const Program& p);

// Elements an attention mask's rows are aligned to (sdpa_mask_strides).
constexpr int64_t kAttentionMaskAlignment = 16;

// Whether the graph has a 2-D convolution, or the backward of one, that the layouts above apply to.
bool has_2d_convolution(const Graph& g);

// Whether the graph's activations are to be stored channels-last (LowerOptions::
// channels_last_activations): it has 2-D convolutions, at least one per kNodesPerConvolution
// nodes. A transformer with a convolution for its patch embedding (ViT, Swin) is not a
// convnet: its 4-D values (Swin's [B, H, W, C] windows, attention scores) are read in
// their own layouts, and its one convolution gets channels-last operands by itself
// (extern_input_layout). TorchInductor's layout optimization skips such graphs by the same
// count (decide_layout_opt: "only a few conv").
constexpr size_t kNodesPerConvolution = 300;
bool convolutions_lead_the_layout(const Graph& g);

// The strides ATen will produce for output `k` when the inputs have the layouts
// chosen above, or nullopt when they are eager's (node.outputs[k].strides).
std::optional<std::vector<int64_t>> extern_output_layout(const Node& node, int k);

}  // namespace ember
