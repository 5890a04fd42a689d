// Reductions walk their reduced dims in the memory order of what they read.
//
// A reduction's loops follow its input's logical dims. Where that is not memory order,
// consecutive iterations read elements far apart: a GroupNorm's statistics over
// [C/G, H*W] of a channels-last activation step C elements from one iteration to the
// next, each load its own 32-byte sector (poolformer's first stage: 8x the tensor's
// bytes read, 220 us a call where 26 MB take 10). The order of a sum's (or max's) terms changes
// nothing but its rounding, so the reduced dims are reordered: the one with the largest
// stride in the load that reads the most of them outermost, the contiguous one
// innermost, where merge_inner_dims can then fold them into one contiguous loop and the
// CUDA row tile reads it in vector words.
//
// Not for arg-reductions (the first extremum in the logical order wins) nor scans (the
// order is the op), nor in graphs with symbols (generic paths compare static twins made
// without this pass; a graph with symbols keeps its lowering's order). A CUDA pass: the
// pipeline runs it after dead-code elimination.
#pragma once
#include "lower/program.h"

namespace ember {

void order_reduced_dims(Program& p);

// The first load of `c` whose index moves with the most of its reduced dims, with how
// many it moves with (null and 0 when none): the load whose layout a reduction follows
// (order_reduced_dims, split_long_reductions).
std::pair<Expr, int> main_reduced_load(const ComputedBuffer& c);

}  // namespace ember
