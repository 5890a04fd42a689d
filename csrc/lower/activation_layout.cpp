#include "lower/activation_layout.h"

#include "ir/affine.h"
#include "lower/extern_layouts.h"

namespace ember {

Dims activation_strides(const TensorIR& t, const Dims& strides) {
  const std::vector<int64_t> sizes = hints(t.sizes);
  const Dims channels_last = to_dims(channels_last_strides(sizes));
  if (!t.fn || sizes.size() != 4 || strides.size() != 4 || sizes[3] < 2) return channels_last;
  // Placeholder vars for the value's four dims: ids no loop var has.
  std::vector<Expr> idx;
  for (int d = 0; d < 4; ++d) idx.push_back(var(-2000 - d));
  int64_t along_channels = 0, along_last = 0;  // bytes read unit-stride along dim 1, dim 3
  walk_loads(t.fn(idx), [&](const Expr& load) {
    // The data it reads, not its indices: an index table (a relative position bias's)
    // says nothing of the layout its gathered values are read in.
    auto f = affine_form(load->args[0]);
    if (!f || !is_float(load->dtype)) return;
    const int64_t bytes = dtype_size(load->dtype);
    if (sizes[1] > 1 && f->coef_of(-2001) == 1) along_channels += bytes;
    if (f->coef_of(-2003) == 1) along_last += bytes;
  });
  return along_last > along_channels ? strides : channels_last;
}

}  // namespace ember
