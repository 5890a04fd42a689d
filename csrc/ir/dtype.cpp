#include "ir/dtype.h"

#include <algorithm>
#include <stdexcept>

namespace ember {

namespace {
struct Info {
  DType t;
  const char* name;
  const char* c_type;
  int64_t size;
};
constexpr Info kInfo[] = {
    {DType::Bool, "bool", "uint8_t", 1}, {DType::U8, "u8", "uint8_t", 1},
    {DType::I8, "i8", "int8_t", 1},      {DType::I16, "i16", "int16_t", 2},
    {DType::I32, "i32", "int32_t", 4},   {DType::I64, "i64", "int64_t", 8},
    {DType::F16, "f16", "uint16_t", 2},  {DType::BF16, "bf16", "uint16_t", 2},
    {DType::F32, "f32", "float", 4},     {DType::F64, "f64", "double", 8},
};

int category(DType t) { return is_bool(t) ? 0 : is_int(t) ? 1 : 2; }
}  // namespace

const char* dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
const char* dtype_c_type(DType t) { return kInfo[static_cast<int>(t)].c_type; }
int64_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }

DType dtype_from_name(const std::string& name) {
  for (const auto& i : kInfo)
    if (name == i.name) return i.t;
  throw std::invalid_argument("unknown dtype '" + name + "'");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    // f16 + bf16 -> f32; otherwise the wider float.
    if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (ca == 1) {
    // u8 with a signed type needs the next wider signed type.
    if (a == DType::U8 || b == DType::U8) {
      DType other = a == DType::U8 ? b : a;
      return other == DType::I8 ? DType::I16 : other;
    }
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  return a;
}

DType result_type(const Operand* ops, int n, DType default_float) {
  // For each operand kind, the promoted dtype of the operands of that kind.
  bool seen[3] = {false, false, false};
  DType acc[3] = {DType::Bool, DType::Bool, DType::Bool};
  for (int i = 0; i < n; ++i) {
    int k = static_cast<int>(ops[i].kind);
    DType t = ops[i].dtype;
    if (ops[i].kind == OperandKind::Scalar && is_float(t)) t = default_float;
    if (ops[i].kind == OperandKind::Scalar && is_int(t)) t = DType::I64;
    acc[k] = seen[k] ? promote_types(acc[k], t) : t;
    seen[k] = true;
  }
  // The result has the highest category present; its width comes from the
  // highest-priority kind that reaches that category.
  int top = 0;
  for (int k = 0; k < 3; ++k)
    if (seen[k]) top = std::max(top, category(acc[k]));
  for (int k = 0; k < 3; ++k)
    if (seen[k] && category(acc[k]) == top) return acc[k];
  return DType::F32;
}

}  // namespace ember
