#include "codegen/cuda/vector_access.h"

namespace ember {

std::string vector_type(int bytes) { return bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : "uint32_t"; }

std::string lane_pointer(DType t, bool is_const) {
  const char* c = is_const ? "const " : "";
  return std::string("(") + c + (t == DType::F32 ? "float" : t == DType::I32 ? "int32_t" : "uint16_t") + "*)";
}

std::string lane_value(DType t, const std::string& word, const std::string& lane) {
  std::string value = "(" + lane_pointer(t, true) + "&" + word + ")[" + lane + "]";
  if (t == DType::F16) return "ember_h2f(" + value + ")";
  if (t == DType::BF16) return "ember_bf2f(" + value + ")";
  return value;
}

}  // namespace ember
