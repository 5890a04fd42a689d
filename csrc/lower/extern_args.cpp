// The layout an extern (ATen) op's tensor argument is stored in. ATen kernels take any
// strides in principle, but some run faster on another layout (extern_input_layout:
// channels-last convolutions, aligned attention masks), and some refuse layouts at run time
// that the decomposition which chose them avoided at trace time (the fused attention
// kernels; a padded, broadcast attention bias). Layout changes are for static graphs only.
// A CPU graph's convolution weight that is a parameter keeps its layout: the runtime
// prepares it once (prepared_arg).
#include "lower/extern_layouts.h"
#include "lower/lowering.h"

namespace ember {

namespace {

// Whether v, passed as stored(v) passes it, meets the fused attention kernels' rules.
bool attention_layout_ok(const TensorIR& v) {
  if (v.view)
    return !v.view->offset.is_static() ||
           meets_attention_layout_rules(hints(v.sizes), hints(v.view->strides), v.view->offset.hint(), v.dtype);
  const Dims strides = v.preferred_strides.empty() ? contiguous_strides(v.sizes) : v.preferred_strides;
  return meets_attention_layout_rules(hints(v.sizes), hints(strides), 0, v.dtype);
}

}  // namespace

std::optional<std::vector<int64_t>> LowerCtx::extern_arg_layout(const Node& n, int arg_index, const TensorIR& v,
                                                                 const TensorType& eager) const {
  if (!graph_.symbols.empty()) return std::nullopt;
  const std::vector<int64_t> sizes = hints(v.sizes);
  if (auto layout = extern_input_layout(n, arg_index, sizes, eager)) return layout;
  // A lazy value eager broadcasts is stored once along its broadcast dims, in eager's strides.
  if (!v.view)
    if (auto layout = eager_broadcast_layout(sizes, eager)) return layout;
  if (has_attention_layout_rules(n) && !attention_layout_ok(v)) return attention_operand_strides(sizes, eager);
  return std::nullopt;
}

bool LowerCtx::prepared_arg(const Node& n, int arg_index, const TensorIR& v) const {
  return opts_.prepared_weights && graph_.symbols.empty() && preparable_weight(n, arg_index, v.view, prog_);
}

}  // namespace ember
