// Reduction accumulators in the CUDA printer: declared per thread and updated per
// element as codegen/accumulator.h writes them, combined across a row's threads (warp
// shuffles, then shared memory).
#pragma once
#include <cstdint>
#include <string>

#include "codegen/accumulator.h"
#include "codegen/c_emitter.h"
#include "lower/program.h"

namespace ember {

// The C type a reduction accumulates in over `chain` elements per thread: double for a
// long float sum (schedule/accumulator.h: kLongSum).
std::string acc_type(const ComputedBuffer& c, int64_t chain);

// Declares the accumulator (and NaN flag) of reduction `c` over `chain` elements a thread.
Acc declare_thread_acc(CEmitter& em, const ComputedBuffer& c, int64_t chain);
// Combines `acc` across the threads of a row: `row_lanes` consecutive lanes of a warp
// (32: the warp; fewer: one of the rows a warp holds), or with row_lanes 0 a block
// (through the kernel's `scratch` array); every thread of the row gets the result.
void combine(CEmitter& em, const std::string& acc, ReduceOp op, int row_lanes);
// The same for an arg-reduction's (value, index) pair (ember_warp_arg / ember_block_arg,
// whose block form needs a `scratch` of 64 slots).
void combine_arg(CEmitter& em, const Acc& a, ReduceOp op, int row_lanes);
}  // namespace ember
