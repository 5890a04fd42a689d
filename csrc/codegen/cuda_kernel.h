// CUDA C source for a Schedule: the CUDA dialect of the C printer. The expression
// printer is the CPU path's CEmitter; what differs is how a Kernel's rows and stages map
// onto threads:
//
//   Elementwise  a kernel with no reductions whose items are independent per element
//                (one stage, or only per-row stages): each thread takes 4 or 8
//                elements of rows x inner per grid-stride step, blockDim apart.
//   Transpose    an elementwise kernel whose store and some load are contiguous along
//                different dims: tiles staged through shared memory, read and written
//                coalesced (cuda_transpose.h).
//   RowWarp      rows of at most kWarpRowWork inner iterations per stage: one warp per
//                row (8 rows a block); reductions by warp shuffles, __syncwarp between
//                stages.
//   RowBlock     longer rows: one block per row; reductions by warp shuffles, then the
//                warps' partials through shared memory, __syncthreads between stages.
//
// In the row shapes every thread of a row takes every stage's inner iterations
// tid, tid + threads, ... and ends a reduction holding the row's result, so reduction
// results and per-row values are registers for all later stages (softmax and LayerNorm
// are one pass over the row, as on CPU). Values a later stage reads from memory were
// stored before a barrier. Per-row stores are made by thread 0 of the row. Where it
// fits, a row tile (kRowTileValues) replaces that loop: chunks of 4 or 8 elements read
// and written with vector accesses, and rows short enough kept in registers across
// the stages.
//
// A vector stage (a reduction across rows: a column sum) gives each thread whole kept
// lanes, reduced alone, its results through memory. In a kernel of one row, such stages
// are column-split (kColumnSplitBlocks): a first launch reduces chunks of the rows on
// many blocks. A scan stage runs on thread 0 of its row: correct and slow when rows are
// few.
//
// Not handled yet, and refused with CudaUnsupported (the graph runs eagerly):
// arg-reductions, split stages, symbolic sizes.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

// The CUDA printer cannot express this schedule (yet); the message names what.
struct CudaUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CudaKernelInfo {
  enum class Shape : uint8_t { Elementwise, Transpose, RowWarp, RowBlock };
  std::string name;
  Shape shape = Shape::Elementwise;
  uint32_t grid = 1;               // blocks; 0 when there is nothing to do
  uint32_t block = 1;              // threads per block
  std::vector<int> args;           // buffer ids, in parameter order (one pointer each)
  std::vector<int> origins;        // graph nodes whose work the kernel does
  // A column split (see kColumnSplitBlocks): <name>_partial runs first on partial_grid
  // blocks of partial_block threads, with the same parameters; 0 when there is none.
  uint32_t partial_grid = 0;
  uint32_t partial_block = 0;
  // Row shapes' row tile (see kRowTileValues); row_lanes == 0 when there is none.
  // row_lanes: consecutive elements a thread takes at once (one 16/8/4-byte access per
  // buffer when > 1); row_slots: such chunks a thread keeps in registers across stages
  // (0: a loop that reads memory in every stage); row_cached: buffers read once.
  uint32_t row_lanes = 0;
  uint32_t row_slots = 0;
  std::vector<int> row_cached;
  // Elementwise vector path (see kHoistWords): per-lane values computed once per thread
  // before the grid-stride loop, and vector words of [C]-like buffers loaded there.
  uint32_t hoisted_values = 0;
  uint32_t hoisted_words = 0;
};

struct CudaCode {
  std::string source;                       // prelude + every kernel, in order
  std::string prelude;                      // what every part of a split compile repeats
  std::vector<std::string> kernel_sources;  // parallel to kernels: each kernel's text
  std::vector<CudaKernelInfo> kernels;      // parallel to Schedule::kernels
  std::vector<bool> buffer_in_memory;       // per Program buffer
  // Scratch buffers the kernels need beyond the Program's (column-split partials): ids
  // Program::buffers.size() + j, this many bytes each. The compiled graph adds them to
  // its Program as computed buffers, so the arena plan places them like any other.
  std::vector<int64_t> scratch_bytes;
};

// Inner iterations per stage up to which a row runs on one warp.
constexpr int64_t kWarpRowWork = 1024;

// The row tile (row shapes whose looping stages share their inner dims: softmax,
// LayerNorm and their backwards). Each thread takes chunks of `lanes` consecutive
// elements of the row (8 when every buffer has elements of at most 2 bytes, else 4, so
// that an access moves 16 bytes; fewer when the row's last dim is not a multiple),
// chunk tid, tid + threads, ..., read and written with one vector access per buffer
// after a run-time alignment check (else the scalar loop runs). When a thread's
// elements number at most kRowTileValues, its chunks are unrolled slots, the same in
// every stage, so a buffer the stages read at one index is loaded once into registers
// (and a value a stage stores and a later one reads is kept), within kRowTileBytes of
// registers a thread: rows read from memory once, not once per stage.
constexpr int64_t kRowTileValues = 32;
constexpr int64_t kRowTileBytes = 192;

// A kernel of one row whose vector stages reduce many rows (a backward's bias and
// LayerNorm-weight gradients: [C] <- sum over R rows of [R, C]) would walk all R x C
// elements on one block. A column split gives chunk s of the reduced rows to block s of
// a first launch, which writes each column's partial to scratch; the kernel itself then
// combines the partials of each column in chunk order (deterministic) and runs its
// later stages. About this many chunks, of at least kColumnSplitMinRows rows each.
constexpr int64_t kColumnSplitBlocks = 128;  // about one block per SM on an H100 (132)
constexpr int64_t kColumnSplitMinRows = 16;

// Hoisting in the elementwise vector path. When the grid-stride step (blocks x 256
// threads x lanes elements) is a multiple of the innermost extent, a thread's innermost
// coordinate is the same in every step, so values that depend on it alone (channels-last
// BatchNorm's per-channel scale) are computed once per thread, per lane, before the
// loop (lane_invariant.h says which), and the vector words such buffers are read in
// are loaded there too. At most kHoistWords 32-bit registers a thread. Only when the
// grid would give threads several steps: it is then made at most 1/kHoistSteps of the
// blocks the elements need, at least kHoistBlocks (a full H100 at 8 blocks an SM), and
// a multiple of extent / gcd(extent, 256 x lanes) (no hoisting when that multiple
// exceeds an eighth of the grid).
constexpr int64_t kHoistWords = 48;  // 32 left two of ResNet's six bf16 [C] words in the loop (73% vs 84%)
constexpr int64_t kHoistSteps = 8;
constexpr int64_t kHoistBlocks = 1024;

CudaCode generate_cuda(const Program& p, const Schedule& s);
const char* cuda_shape_name(CudaKernelInfo::Shape s);

}  // namespace ember
