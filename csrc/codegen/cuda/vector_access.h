// The C of vector accesses (schedule/cuda/vector_access.h says which accesses are
// vector ones): a word's type, a pointer to its lanes, a lane's value.
#pragma once
#include <string>

#include "ir/dtype.h"
#include "schedule/cuda/vector_access.h"

namespace ember {

// The C type of a vector word of `bytes`: uint4, uint2 or uint32_t.
std::string vector_type(int bytes);
// A pointer cast that reads (or writes) the lanes of a vector word of elements of `t`.
std::string lane_pointer(DType t, bool is_const);
// Lane `lane` of the vector word named `word` (elements of `t`), f16/bf16 widened to f32.
std::string lane_value(DType t, const std::string& word, const std::string& lane);

}  // namespace ember
