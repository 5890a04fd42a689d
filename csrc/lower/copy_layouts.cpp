#include "lower/copy_layouts.h"

#include <optional>
#include <string>

namespace ember {

namespace {

// Whether `n` is an element-wise copy of its first argument; `preserves` tells whether it
// keeps that argument's layout (no memory format, or preserve_format).
bool copy_format(const Node& n, bool& preserves) {
  int at = -1;
  if (n.op == "aten.clone.default") at = 1;
  else if (n.op == "aten._to_copy.default") at = 6;
  else if (n.op != "prims.convert_element_type.default" && n.op != "aten.lift_fresh_copy.default") return false;
  const Arg* fmt = at >= 0 && static_cast<int>(n.args.size()) > at ? &n.args[at] : nullptr;
  preserves = !fmt || fmt->is_none() || (fmt->kind == Arg::Kind::Str && fmt->s == "preserve_format");
  return true;
}

bool dense_static(const TensorType& t) {
  if (!t.is_tensor || t.opaque || !t.sym_sizes.empty() || !t.sym_strides.empty()) return false;
  if (t.strides.size() != t.sizes.size()) return false;
  for (int64_t s : t.strides)
    if (s <= 0) return false;
  int64_t numel = 1, span = 1;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    numel *= t.sizes[d];
    span += (t.sizes[d] - 1) * t.strides[d];
  }
  return numel > 0 && span == numel;  // every element once, no gaps
}

// Strides equal but for dims of size 1 (whose stride nothing reads).
bool same_layout(const TensorType& t, const std::vector<int64_t>& strides) {
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (t.sizes[d] != 1 && t.strides[d] != strides[d]) return false;
  return true;
}

}  // namespace

std::vector<std::vector<std::vector<int64_t>>> copy_requested_strides(const Graph& g) {
  std::vector<std::vector<std::vector<int64_t>>> asked(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) asked[i].resize(g.nodes[i].outputs.size());
  if (!g.symbols.empty()) return asked;
  // What each value's copies ask (nullopt: none asked yet; an empty vector: they disagree).
  std::vector<std::vector<std::optional<std::vector<int64_t>>>> want(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) want[i].resize(g.nodes[i].outputs.size());
  // Readers come after their producers: walking backwards, a copy's own request is final
  // when it passes it on.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool preserves = false;
    if (!copy_format(n, preserves) || n.args.empty() || !n.args[0].is_tensor() || n.outputs.empty()) continue;
    const ValueRef src = n.args[0].ref;
    const TensorType& in = g.type_of(src);
    const TensorType& out = n.outputs[0];
    if (!dense_static(in) || !dense_static(out) || in.sizes != out.sizes) continue;
    std::vector<int64_t> ask;
    if (!preserves) ask = out.strides;
    else if (want[i][0] && !want[i][0]->empty()) ask = *want[i][0];
    else continue;
    auto& w = want[src.node][src.index];
    if (!w) w = ask;
    else if (*w != ask) w = std::vector<int64_t>{};  // copies that disagree: eager's layout
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t k = 0; k < g.nodes[i].outputs.size(); ++k) {
      const auto& w = want[i][k];
      const TensorType& t = g.nodes[i].outputs[k];
      if (w && !w->empty() && dense_static(t) && !same_layout(t, *w)) asked[i][k] = *w;
    }
  return asked;
}

}  // namespace ember
