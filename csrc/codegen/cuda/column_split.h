// Vector stages of the row shapes and their column split, printed from the plan
// (schedule/cuda/column_split.h): the partial launch, and the stage that reduces its
// rows itself or combines the partials in chunk order.
#pragma once
#include <string>

#include "codegen/cuda/printer.h"
#include "schedule/cuda/column_split.h"

namespace ember {

// The partial launch: block s reduces chunk s of every vector stage's rows, for all of
// the stage's kept lanes (a thread columns_a_thread of them at once, what depends on the
// column alone computed before the rows), and stores each lane's partial (NaN for a float
// max/min that saw one) to scratch. In the vector geometry (split.lanes > 0), a block
// reduces one chunk of one tile of columns, a thread `lanes` consecutive columns read in
// one access a row, the block's groups of rows added in group order. A whole function, printed after the kernel (it makes a fresh
// emitter: pr.signature).
std::string partial_kernel(CudaPrinter& pr, const ColumnSplit& split, const CudaKernelInfo& info);

// A vector stage: inner[0] is a kept dim, contiguous in memory; inner[1..] are reduced.
// Each thread takes kept lanes tid, tid + threads, ... (coalesced across the warp) and
// reduces its lanes alone (or, with a split, combines their partials in chunk order), so
// no partials cross threads. Results go to memory; returns true (it stored).
bool print_vector_stage(CudaPrinter& pr, const ColumnSplit& split, const Stage& stage);

}  // namespace ember
