// Vector accesses: one 16-, 8- or 4-byte load or store for `lanes` consecutive
// elements, which the elementwise vector path (vector_plan.h), the row tile
// (row_tile.h) and the transposes (transpose_plan.h) plan: which dtypes and indices
// allow one. Their C types: codegen/cuda/vector_access.h.
#pragma once
#include <functional>
#include <string>
#include <unordered_map>

#include "ir/expr.h"
#include "lower/program.h"

namespace ember {

// How many bytes a vector access of `lanes` elements of `t` moves, or 0 when this
// dtype is not vector-accessed (bool, 8-byte types).
int vector_bytes(DType t, int lanes);
// Whether `index` (of buffer `b`) addresses lanes idx0 .. idx0 + lanes - 1 for a group
// of `lanes` consecutive values of var `v` starting at a multiple of `lanes`, with
// idx0 a multiple of `lanes` and every index inside the buffer (`extents`: every var's).
bool vector_index(const Program& p, const Expr& index, int b, int v, int lanes,
                  const std::unordered_map<int, int64_t>& extents);

// The same access pattern in a kernel of a graph with symbols, where no range can be
// proved at the hints: `index` is v + sum(c * var) + c0 with every c and c0 a known
// multiple of `lanes` (768 * s1 is; symbolic_affine.h). That every lane stays inside
// the buffer is the caller's to know: it does for a store and for a load outside any
// Where branch, lane by lane (each lane is an iteration of the kernel, which accesses
// there anyway; v's extent is a static multiple of `lanes`).
bool symbolic_vector_index(const Expr& index, int v, int lanes);

// Calls f(load, guarded) for every load in e: guarded when it lies in a Where branch
// (read only when the branch is taken; its index may be out of bounds otherwise).
void walk_guarded_loads(const Expr& e, bool guarded, const std::function<void(const Expr&, bool)>& f);

}  // namespace ember
