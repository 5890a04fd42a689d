#include "codegen/cuda_vector_access.h"

#include "ir/affine.h"

namespace ember {

int vector_bytes(DType t, int lanes) {
  if (t != DType::F16 && t != DType::BF16 && t != DType::F32 && t != DType::I32) return 0;
  return static_cast<int>(dtype_size(t)) * lanes;
}

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

bool vector_index(const Program& p, const Expr& index, int b, int v, int lanes,
                  const std::unordered_map<int, int64_t>& extents) {
  auto af = affine_form(index);
  if (!af) return false;
  auto it = af->coef.find(v);
  if (it == af->coef.end() || it->second != 1 || af->constant % lanes != 0 || af->constant < 0) return false;
  int64_t last = af->constant;
  for (const auto& [var_id, c] : af->coef) {
    if (c < 0 || (var_id != v && c % lanes != 0)) return false;
    auto e = extents.find(var_id);
    if (e == extents.end()) return false;
    last += c * (e->second - 1);
  }
  return last < p.buffers[b].extent().hint();
}

}  // namespace ember
