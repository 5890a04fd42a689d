// Element types and PyTorch's type-promotion rules.
//
// f16 and bf16 are storage types only: every computation on them happens in f32
// (compute_type), and values are rounded back on store, as TorchInductor does.
#pragma once
#include <cstdint>
#include <string>

namespace ember {

enum class DType : uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };

const char* dtype_name(DType t);          // "f32", "i64", ... (the text IR spelling)
DType dtype_from_name(const std::string& name);  // throws std::invalid_argument
const char* dtype_c_type(DType t);        // storage type in generated C
int64_t dtype_size(DType t);

inline bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
inline bool is_int(DType t) { return t == DType::U8 || t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64; }
inline bool is_bool(DType t) { return t == DType::Bool; }

// The type arithmetic happens in: f16/bf16 widen to f32, everything else is itself.
inline DType compute_type(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

// torch.promote_types for two tensor dtypes of the same priority class.
DType promote_types(DType a, DType b);

// One operand of torch.result_type: a tensor with dim > 0, a 0-dim tensor, or a
// Python scalar (bool/int/float). Higher categories win; within a category the
// higher-priority operand kind decides.
enum class OperandKind : uint8_t { Tensor, ZeroDim, Scalar };
struct Operand {
  DType dtype;
  OperandKind kind;
};
DType result_type(const Operand* ops, int n, DType default_float = DType::F32);

}  // namespace ember
