// Vector accesses: one 16-, 8- or 4-byte load or store for `lanes` consecutive
// elements, as the elementwise vector path (cuda_vector_path.h) and the row tile
// (cuda_row_tile.h) print them: which dtypes and indices allow one, and its C types.
#pragma once
#include <string>
#include <unordered_map>

#include "ir/expr.h"
#include "lower/program.h"

namespace ember {

// How many bytes a vector access of `lanes` elements of `t` moves, or 0 when this
// dtype is not vector-accessed (bool, 8-byte types).
int vector_bytes(DType t, int lanes);
// The C type of a vector word of `bytes`: uint4, uint2 or uint32_t.
std::string vector_type(int bytes);
// A pointer cast that reads (or writes) the lanes of a vector word of elements of `t`.
std::string lane_pointer(DType t, bool is_const);
// Lane `lane` of the vector word named `word` (elements of `t`), f16/bf16 widened to f32.
std::string lane_value(DType t, const std::string& word, const std::string& lane);

// Whether `index` (of buffer `b`) addresses lanes idx0 .. idx0 + lanes - 1 for a group
// of `lanes` consecutive values of var `v` starting at a multiple of `lanes`, with
// idx0 a multiple of `lanes` and every index inside the buffer (`extents`: every var's).
bool vector_index(const Program& p, const Expr& index, int b, int v, int lanes,
                  const std::unordered_map<int, int64_t>& extents);

}  // namespace ember
