// The row tile of the row shapes (RowWarp, RowBlock), planned: the looping stages walk
// the row in chunks of 4 or 8 consecutive elements, read and written with one vector
// access per buffer, and rows short enough stay in registers across the stages. Printed
// stage by stage by codegen/cuda/row_tile.h; when the tile's pointers are not aligned,
// the same tile runs with its accesses element by element.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "ir/expr.h"
#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/launch.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

// The row tile (row shapes whose looping stages share their inner dims: softmax,
// LayerNorm and their backwards). Each thread takes chunks of `lanes` consecutive
// elements of the row (8 when every buffer has elements of at most 2 bytes, else 4, so
// that an access moves 16 bytes; fewer when the row's last dim is not a multiple),
// chunk tid, tid + threads, ..., read and written with one vector access per buffer
// after a run-time alignment check (else element by element). When a thread's
// elements number at most kRowTileValues, its chunks are unrolled slots, the same in
// every stage, so a buffer the stages read at one index is loaded once into registers
// (and a value a stage stores and a later one reads is kept), within kRowTileBytes of
// registers a thread: rows read from memory once, not once per stage.
//
// A RowWarp row short enough for registers takes the chunk width and the threads (a
// power of two up to a warp) that leave the fewest of its threads' slots idle, several
// rows a warp when it has fewer chunks than lanes (pack_warp_rows, launch.h): rows of
// 96, 192 and 384 bf16 (ConvNeXt's and Swin's LayerNorms) take 4, 8 and 16 threads of
// 3 chunks of 8. Those threads read at least kRowSegmentBytes of their row at a time.
constexpr int64_t kRowTileValues = 32;
constexpr int64_t kRowTileBytes = 192;
constexpr int64_t kRowSegmentBytes = 32;

// A row kernel's row tile. Chunk c of a row is elements c * lanes .. c * lanes + lanes - 1
// (flat over the looping stages' inner dims); thread tid takes chunks tid, tid + threads,
// ..., slot u being chunk u * threads + tid.
struct RowTile {
  int lanes = 0;             // elements a chunk; 0: no row tile
  int64_t chunks = 0;        // chunks a row
  int64_t slots = 0;         // chunks a thread, unrolled, registers kept; 0: a loop
  std::vector<bool> tiled;   // per stage: it loops over the row's elements
  std::map<int, Expr> loads;  // buffers read a chunk at a time (one access), at this index
  std::set<int> stores;       // buffers written a chunk at a time
  std::set<int> cached;       // of `loads`: read once, at the first stage that reads them
  std::map<int, int> first_read;  // cached buffer -> the stage that loads it
  std::set<int> kept;         // this kernel's per-element values later stages read from registers
  std::set<int> unstored;     // of `kept`: values no memory holds (Placement), never stored
  // Per-element values a tiled stage computes and a later tiled stage computes again (a
  // softmax's masked or biased input, its exp(x - max)): held in registers from the
  // first, so that the later stages neither re-read the mask nor re-gather the bias nor
  // recompute the exp. Planned within kRowTileBytes, after the buffers; with slots only.
  struct Value {
    Expr value;
    int stage = 0;  // the stage that computes it first
  };
  std::vector<Value> values;
  int align = 0;              // bytes every chunk access's pointer must be aligned to (0: none)
};

// Row shapes with neither vector stages nor scans. The tile takes the looping stages
// whose inner dims are those of the largest one (so that chunk c of one stage is chunk c
// of every other, on the same thread); other looping stages (a mask's row fused before a
// LayerNorm) keep the per-element loop. Only when some buffer is accessed a chunk at a
// time or kept in registers; lanes == 0 otherwise. A RowBlock kernel whose tile has slots
// may get fewer threads (launch.threads, info.block); a RowWarp kernel with a short row,
// several rows a warp (pack_warp_rows). Sets info.row_lanes, row_slots, row_cached and
// row_unstored.
//
// A value of this kernel that `m` keeps out of memory though later stages read it (a
// LayerNorm's input computed in the kernel that nothing else reads: schedule_cuda
// plans the tile again without it) moves no bytes: it does not widen the chunk's
// element, and is `unstored` when kept. A tile that does not keep it cannot run:
// tile_keeps_unstored says so.
RowTile plan_row_tile(const Program& p, const Schedule& s, const Placement& m, int ki, CudaLaunch& launch,
                      CudaKernelInfo& info);

// Whether `t` keeps in registers every value kernel `ki` computes that `m` leaves out of
// memory and a later stage of the kernel reads (always, when there is none).
bool tile_keeps_unstored(const Program& p, const Schedule& s, const Placement& m, int ki, const RowTile& t);

}  // namespace ember
