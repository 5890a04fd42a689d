#include "schedule/accumulator.h"

namespace ember {

bool sums_in_double(const ComputedBuffer& c, int64_t chain) {
  return c.reduce_op == ReduceOp::Sum && c.acc_dtype == DType::F32 && chain > kLongSum;
}

int64_t accumulator_bytes(const ComputedBuffer& c, int64_t chain) {
  if (c.reduce_op == ReduceOp::Any || c.reduce_op == ReduceOp::All) return 4;  // an int flag
  if (sums_in_double(c, chain)) return 8;
  switch (c.acc_dtype) {
    case DType::F16:
    case DType::BF16:
    case DType::F32:
    case DType::I32: return 4;
    default: return 8;
  }
}

}  // namespace ember
