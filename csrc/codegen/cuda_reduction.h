// Reduction accumulators in the CUDA printer: declared per thread, updated per element,
// combined across a row's threads (warp shuffles, then shared memory), and turned into
// the value a load of the stored result would give.
#pragma once
#include <cstdint>
#include <string>

#include "codegen/c_emitter.h"
#include "lower/program.h"

namespace ember {

struct Acc {
  std::string acc, flag, type;  // accumulator, NaN flag (float max/min), its C type
  std::string index;            // argmax/argmin: the best element's index (int64_t)
};

// The C type a reduction accumulates in over `chain` elements per thread: double for a
// long float sum (schedule/accumulator.h: kLongSum).
std::string acc_type(const ComputedBuffer& c, int64_t chain);

// Declares the accumulator (and NaN flag) of reduction `c` over `chain` elements a thread.
Acc declare_acc(CEmitter& em, const ComputedBuffer& c, int64_t chain);
// Adds value `v` (C text) to `a`; an arg-reduction takes the element's flat index within
// the reduced dims (`index`: C text), and a thread must visit its elements in increasing
// index order (the first extremum it meets wins).
void accumulate(CEmitter& em, const ComputedBuffer& c, const Acc& a, const std::string& v,
                const std::string& index = "");
// Combines `acc` across the threads of a warp (`warp`) or of a block (through the
// kernel's `scratch` array); every thread gets the result.
void combine(CEmitter& em, const std::string& acc, ReduceOp op, bool warp);
// The same for an arg-reduction's (value, index) pair (ember_warp_arg / ember_block_arg,
// whose block form needs a `scratch` of 64 slots).
void combine_arg(CEmitter& em, const Acc& a, ReduceOp op, bool warp);
// The reduction's result as a local equal to what a load of the stored value (of dtype
// `out`) would give.
std::string finish_acc(CEmitter& em, const ComputedBuffer& c, const Acc& a, DType out);

}  // namespace ember
