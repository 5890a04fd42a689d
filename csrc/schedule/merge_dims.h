#pragma once
#include <functional>

#include "schedule/kernel.h"

namespace ember {

// Collapses adjacent inner loop dims of each stage into one when every use of
// their loop vars is an affine memory index in which the outer dim's stride is
// the inner dim's stride times its size (the dims are contiguous together).
// A [16,16] reduction over H and W becomes one 256-long vectorizable loop.
void merge_inner_dims(Schedule& s);

// Whether loop vars a and b appear in `value` only inside memory indices (not in bounds
// tests or values), each of which passes `index_ok`: what merging two dims needs
// (merge_inner_dims, merge_symbolic_outer_dims).
bool vars_only_in_indices(const Expr& value, int a, int b, const std::function<bool(const Expr&)>& index_ok);

// Whether memory index `index` lets loop vars a (outer) and b (inner, of size `size_b`)
// become one: it uses neither, or it is affine (sizes may be symbols) and a's coefficient
// is b's times size_b.
bool index_merges(const Expr& index, int a, int b, const Dim& size_b);

}  // namespace ember
