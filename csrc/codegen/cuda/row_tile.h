// The row tile of the row shapes, printed from its plan (schedule/cuda/row_tile.h):
// each looping stage's chunks, read and written a vector word at a time, registers kept
// across stages. row.h prints the rest of the row.
#pragma once
#include <string>

#include "codegen/cuda/printer.h"
#include "schedule/cuda/row_tile.h"

namespace ember {

// The row tile's registers: each cached buffer's chunks (row<b>[slot], raw words) and
// each kept value (kept<b>[slot * lanes + lane]).
void declare_tile_registers(CudaPrinter& pr, const RowTile& tile);

// Looping stage `st` through the row tile: each of the thread's chunks reads every tile
// buffer with one access (or takes its registers), computes its lanes, and writes tile
// outputs with one access. Returns whether the stage stored anything.
bool print_tile_stage(CudaPrinter& pr, const RowTile& tile, int st);

}  // namespace ember
