#include "lower/program.h"

#include <algorithm>

namespace ember {

const char* reduce_op_name(ReduceOp op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "logsumexp"};
  return names[static_cast<int>(op)];
}

Dim Buffer::numel() const { return product(sizes); }

Dim Buffer::extent() const {
  Dim e = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    if (!(strides[i] == 0)) e = e + (sizes[i] - 1) * strides[i];
  }
  return e;
}

int Program::add_buffer(Buffer b) {
  b.id = static_cast<int>(buffers.size());
  buffers.push_back(std::move(b));
  return buffers.back().id;
}

bool Program::is_whole_input(const StridedView& v) const {
  const Buffer& b = buffers.at(v.buffer);
  return b.kind == Buffer::Kind::Input && !b.opaque && v.offset == Dim(0) && v.sizes == b.sizes && v.strides == b.strides;
}

bool Program::is_dense_whole_buffer(const StridedView& v) const {
  if (!v.offset.is_static() || v.offset.hint() != 0 || buffers.at(v.buffer).sizes != v.sizes) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims that address something
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (!v.sizes[d].is_static() || !v.strides[d].is_static()) return false;
    if (v.sizes[d].hint() > 1) dims.emplace_back(v.strides[d].hint(), v.sizes[d].hint());
  }
  std::sort(dims.begin(), dims.end());
  int64_t step = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != step) return false;
    step *= size;
  }
  return true;
}

std::vector<int> loaded_buffers(const ComputedBuffer& c) {
  std::vector<int> out = loaded_buffers(c.body);
  if (c.is_scatter_add())
    for (int b : loaded_buffers(c.add_at))
      if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}

Expr strided_index(const std::vector<Expr>& idx, const Dims& strides, const Dim& offset) {
  Expr e = int_const(0);
  Dim constant = offset;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (strides[d] == 0 || idx[d]->is_int_const(0)) continue;
    if (idx[d]->is_const()) {
      constant = constant + Dim(idx[d]->ival) * strides[d];
      continue;
    }
    e = add(e, mul(idx[d], strides[d].expr()));
  }
  return add(e, constant.expr());
}

}  // namespace ember
