#include "lower/activation_layout.h"

#include <algorithm>
#include <map>

#include "ir/affine.h"
#include "lower/extern_layouts.h"

namespace ember {

Dims activation_strides(const TensorIR& t, const Dims& strides) {
  const std::vector<int64_t> sizes = hints(t.sizes);
  const Dims channels_last = to_dims(channels_last_strides(sizes));
  if (!t.fn || sizes.size() != 4 || strides.size() != 4) return channels_last;
  // The innermost dim of eager's layout that addresses something: [N, H, W, 1] (a LayerNorm
  // over channels-last channels: its mean) is stored W-innermost in eager's strides and
  // H-innermost "channels-last". Where it is dim 1 ([N, C, 1, 1]) the two layouts agree.
  int last = 3;
  while (last > 1 && sizes[last] < 2) --last;
  if (last <= 1) return channels_last;
  // Placeholder vars for the value's four dims: ids no loop var has.
  std::vector<Expr> idx;
  for (int d = 0; d < 4; ++d) idx.push_back(var(-2000 - d));
  int64_t along_channels = 0, along_last = 0;  // bytes read unit-stride along dim 1, dim `last`
  // Failing both: the loads' dims in their memory order (innermost first), by bytes read.
  std::map<std::vector<int>, int64_t> other_orders;
  walk_loads(t.fn(idx), [&](const Expr& load) {
    // The data it reads, not its indices: an index table (a relative position bias's)
    // says nothing of the layout its gathered values are read in.
    auto f = affine_form(load->args[0]);
    if (!f || !is_float(load->dtype)) return;
    const int64_t bytes = dtype_size(load->dtype);
    if (sizes[1] > 1 && f->coef_of(-2001) == 1) along_channels += bytes;
    if (f->coef_of(-2000 - last) == 1) along_last += bytes;
    std::vector<std::pair<int64_t, int>> steps;  // (coefficient, dim) of the dims it walks
    for (int d = 0; d < 4; ++d)
      if (sizes[d] > 1 && f->coef_of(-2000 - d) > 0) steps.emplace_back(f->coef_of(-2000 - d), d);
    std::sort(steps.begin(), steps.end());
    if (steps.empty() || steps[0].first != 1) return;
    std::vector<int> order;
    for (const auto& st : steps) order.push_back(st.second);
    other_orders[order] += bytes;
  });
  if (along_last > along_channels) return strides;
  if (along_channels > 0 || other_orders.empty()) return channels_last;
  // Neither: a value that reads a tensor laid out another way (a LayerNorm over channels
  // of an NCHW value permuted to [N, H, W, C] reads it W-innermost) is stored in that
  // layout, as Inductor's pointwise results follow their inputs' strides: either of the
  // two would make each of its reads stride through memory.
  const auto best = std::max_element(other_orders.begin(), other_orders.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<int> order = best->first;  // innermost first; then the dims it did not walk, inner ones first
  for (int d = 3; d >= 0; --d)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  std::vector<int64_t> out(4, 0);
  int64_t step = 1;
  for (int d : order) {
    out[d] = step;
    step *= std::max<int64_t>(sizes[d], 1);
  }
  return to_dims(out);
}

}  // namespace ember
