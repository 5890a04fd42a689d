// The row tile of the row shapes, printed from its plan (schedule/cuda/row_tile.h):
// each looping stage's chunks, read and written a vector word at a time, registers kept
// across stages. row.h prints the rest of the row.
#pragma once
#include <string>

#include "codegen/cuda/printer.h"
#include "schedule/cuda/row_tile.h"

namespace ember {

// How the tile's chunks reach memory: one vector access per buffer and chunk (its
// pointers aligned), or element by element (a view that starts anywhere). Either way
// the chunks, threads and kept registers are the same, so values no memory holds
// (RowTile::unstored) stay in registers on both paths.
enum class ChunkAccess { Vector, Elements };

// The row tile's registers: each cached buffer's chunks (row<b>[slot], raw words; with
// vector accesses only) and each kept value (kept<b>[slot * lanes + lane]).
void declare_tile_registers(CudaPrinter& pr, const RowTile& tile, ChunkAccess access);

// Looping stage `st` through the row tile: each of the thread's chunks reads every tile
// buffer with one access (or takes its registers), computes its lanes, and writes tile
// outputs with one access; with ChunkAccess::Elements, each lane reads and writes its
// own element instead. Returns whether the stage stored anything.
bool print_tile_stage(CudaPrinter& pr, const RowTile& tile, int st, ChunkAccess access);

}  // namespace ember
