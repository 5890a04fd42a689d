// Merges adjacent outer dims of a kernel when one of them is symbolic and every index
// the kernel computes walks them as one dim (the coefficient of the outer one is the
// inner one's times its size, symbolically: symbolic_affine.h).
//
// A CUDA kernel decomposes its flat element (or row) number into outer coordinates by
// division: by a literal size that is a multiply and a shift, by a symbolic one a 64-bit
// division on every element. [s0, s1] rows of 3,072 become [s0*s1] rows, whose index
// is x * 3072 + i0. Static dims are left as they are (their divisions are cheap, and the
// static planners read the dims). The CUDA pipeline runs it (pipeline.cpp).
#pragma once
#include "schedule/kernel.h"

namespace ember {

void merge_symbolic_outer_dims(Schedule& s);

}  // namespace ember
