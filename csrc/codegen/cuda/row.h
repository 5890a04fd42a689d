// The row shapes' body: one warp (RowWarp) or one block (RowBlock) per row. Every thread
// of a row takes every stage's inner iterations tid, tid + threads, ... and ends a
// reduction holding the row's result, a register for all later stages; values a later
// stage reads from memory were stored before a barrier, per-row values by thread 0. The
// row tile (row_tile.h) replaces that loop where it fits, and vector stages are
// column_split.h's.
#pragma once
#include <string>
#include <vector>

#include "codegen/cuda/column_split.h"
#include "codegen/cuda/printer.h"
#include "codegen/cuda/reduction.h"
#include "codegen/cuda/row_tile.h"
#include "schedule/kernel.h"

namespace ember {

// The kernel body after the signature: the row's coordinates, then its stages, through
// the row tile when `tile` has lanes (the same tile with its accesses element by element
// as the fallback when its pointers are not aligned).
std::vector<std::string> row_body(CudaPrinter& pr, const RowTile& tile, const ColumnSplit& split);

// Combines each reduction's per-thread partials; every thread gets the row's result,
// a local at `row_level`, and thread 0 stores it. Returns whether anything was stored.
bool finish_row_reductions(CudaPrinter& pr, const Stage& stage, std::vector<Acc>& accs, int row_level);

}  // namespace ember
