#pragma once
#include "schedule/kernel.h"

namespace ember {

// Collapses adjacent inner loop dims of each stage into one when every use of
// their loop vars is an affine memory index in which the outer dim's stride is
// the inner dim's stride times its size (the dims are contiguous together).
// A [16,16] reduction over H and W becomes one 256-long vectorizable loop.
void merge_inner_dims(Schedule& s);

}  // namespace ember
