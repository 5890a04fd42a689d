// The launch geometry of a CUDA kernel: which shape it is printed as (codegen/cuda/kernel.h
// lists them), its grid and block, and the loop sizes its body is printed with.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/transpose_plan.h"
#include "schedule/kernel.h"

namespace ember {

// Inner iterations per stage up to which a row runs on one warp.
constexpr int64_t kWarpRowWork = 1024;
constexpr int kRowsPerWarpBlock = 8;    // RowWarp: warps per block (a row each, or several short ones)
constexpr int kElementwiseBlock = 256;  // Elementwise: threads per block
constexpr int64_t kMaxElementwiseGrid = 1 << 20;  // beyond this, threads loop (grid-stride)

// Elementwise: elements per thread per grid-stride step. A thread with one 2-byte load
// in flight leaves HBM idle (2,048 threads an SM hold about 4 KiB of requests, Little's
// law wants several times that); a thread that issues the loads of several elements,
// blockDim apart so that each warp-wide load stays coalesced, keeps enough in flight.
// 8 when every buffer has elements of at most 2 bytes (16 bytes a thread per buffer),
// else 4. (The measurement against one element per thread is in docs/benchmarks.md.)
int elementwise_elems_per_thread(int64_t max_elem_bytes);

// What choose_launch may be told to do otherwise than its rules say: the knobs that
// max-autotune times (runtime/cuda_autotune.cpp). The default-constructed choice is the
// rules' own launch; each field overrides one decision, for the shapes it applies to.
struct LaunchChoice {
  int elementwise_block = kElementwiseBlock;  // Elementwise: threads per block
  int rows_per_warp_block = kRowsPerWarpBlock;  // RowWarp: warps per block (a row each, or several short ones)
  bool row_block = false;                     // a RowWarp kernel as RowBlock (a block per row)
  int row_threads_shift = 0;                  // RowBlock: threads per row times 2^shift (64..1024)

  bool operator==(const LaunchChoice& o) const {
    return elementwise_block == o.elementwise_block && rows_per_warp_block == o.rows_per_warp_block &&
           row_block == o.row_block && row_threads_shift == o.row_threads_shift;
  }
  // What it changes, for explain and the tuning cache ("default" for the rules' launch).
  std::string text() const;
};

struct CudaLaunch {
  CudaKernelInfo::Shape shape = CudaKernelInfo::Shape::Elementwise;
  int64_t rows = 1;    // the kernel's outer iterations
  int64_t total = 1;   // Elementwise: elements (rows, when every stage is per-row)
  int threads = 32;    // threads per row (row shapes; RowWarp: 32, or fewer with several rows a warp)
  int per_thread = 1;  // elements per thread per step (elementwise)
  int block = kElementwiseBlock;           // Elementwise: threads per block
  int rows_per_block = kRowsPerWarpBlock;  // RowWarp: rows per block (warps times rows a warp)
  bool wide = false;   // 64-bit loop indices
  std::optional<TransposePlan> transpose;  // the Transpose shape's tiles
  // A graph with symbols (codegen/cuda/kernel.h says what its kernels print), and `rows` and
  // `total` as sizes that may be symbolic (their hints are the fields above).
  bool symbolic = false;
  Dim rows_dim = 1;
  Dim total_dim = 1;
};

// The shape and launch of kernel `k`, whose buffer arguments are info.args; sets
// info.shape, info.grid and info.block (and, in a graph with symbols, info.grid_units,
// grid_per_block and grid_cap). Throws CudaUnsupported for a RowBlock kernel of 2^31
// rows or more (checked at each launch when the rows are symbolic).
CudaLaunch choose_launch(const Program& p, const Kernel& k, const std::vector<bool>& in_memory, CudaKernelInfo& info,
                         const LaunchChoice& choice = {});

// A RowWarp launch whose warps each take 32 / `threads` rows of `threads` consecutive
// lanes (a power of two below 32: short rows, row_tile.h chooses it): sets l.threads and
// l.rows_per_block (the block's warps times the rows a warp), and the grid (info.grid,
// and in a graph with symbols info.grid_per_block) for them.
void pack_warp_rows(CudaLaunch& l, CudaKernelInfo& info, int threads);

// A RowWarp kernel with no row tile (row_tile.h packs its own short rows) whose rows are
// shorter than half a warp (a sum over Mixtral's two routed experts: 2 elements a row, 2
// of a warp's 32 lanes busy): its rows take the fewest power-of-two lanes that hold their
// longest stage, several rows a warp (pack_warp_rows). Not for rows of symbolic length,
// scans or vector stages.
void pack_short_rows(const Kernel& k, CudaLaunch& l, CudaKernelInfo& info);

// The choices other than the default worth timing for a kernel the rules launched as
// `info.shape` with `launch`: other block sizes, rows per block, threads per row, and a
// short row as a block per row. Empty for transposes and for graphs with symbols.
std::vector<LaunchChoice> launch_alternatives(const CudaLaunch& launch);

}  // namespace ember
