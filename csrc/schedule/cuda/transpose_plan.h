// The tiled-transpose shape's plan (its body: codegen/cuda/transpose.h), for elementwise
// kernels whose store is contiguous along one loop dim while a load is contiguous along
// another (a transposing
// copy, permute().contiguous(), NCHW <-> NHWC, `x.t() + y`). The plain elementwise shape
// walks such a kernel in one layout, so either its loads or its stores are strided: the
// 3-channel image [64,3,224,224] to channels-last ran at 13% of copy bandwidth, its
// stores 3 elements apart.
//
// A block takes a tile of tile_load x tile_store elements of two loop-dim groups: L, along
// which the staged loads are contiguous, and S, along which the store is. Each staged
// load is read with consecutive threads walking L (coalesced) into shared memory; after a
// barrier, consecutive threads walk S, take the staged values from shared memory,
// evaluate the kernel's items (the other loads read directly) and store (coalesced).
// Only data movement changes: every value is computed by the same expression as on the
// elementwise path.
//
// Where the layout allows, a phase moves 16 bytes per access: each thread takes groups of
// `lanes` consecutive elements of the phase's order, which are `lanes` consecutive,
// aligned elements of every staged buffer (load phase) or stored buffer (store phase),
// either because the phase's fast side's tile is a multiple of `lanes`, or because that
// side is whole and the tile is one run of memory (a 3-channel image's channels-last
// copy stores 3 x 672 consecutive elements; a [C, C, 3, 3] weight's copy loads 9 x 256).
// The vector code runs when the pointers are 16-byte aligned, the scalar code otherwise.
//
// With symbolic sizes (a dynamic batch or sequence) the plan is the one the hints give:
// tile lengths are static, chosen at the hints (a symbolic side is never taken whole);
// extents, the tile count and the grid are evaluated per call; a symbolic side always
// checks its last tile's bounds; vector accesses need every divisibility they rely on
// proved for all sizes (known_multiple), else that phase stays scalar.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/symbolic_affine.h"
#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

constexpr int kTransposeThreads = 256;               // threads per block
constexpr int kTransposeUnroll = 16;                // most steps of a phase's loop unrolled
constexpr int64_t kMaxTransposeGrid = 1 << 20;       // beyond this, blocks loop over tiles
constexpr int64_t kTransposeSharedBytes = 40 << 10;  // staged tiles, all buffers (static limit 48 KiB)

struct TransposePlan {
  // Loop dims that every access sees as one dim (each dim's stride is the previous one's
  // times its size, in the store and in the first staged load), innermost first.
  struct Side {
    std::vector<int> vars;  // kernel loop var ids (outer_var / inner_var)
    Dims sizes;             // parallel to vars
    Dim extent = 1;         // product of sizes
    int64_t tile = 1;       // tile length along this side (static, chosen at the hints)
  };
  Side load;   // L: the staged loads' unit-stride side
  Side store;  // S: the store's unit-stride side
  std::vector<int> rest_vars;  // the other loop dims, outermost first (a block's tile walks none)
  Dims rest_sizes;
  std::vector<int> staged;     // buffers read through shared memory, largest first
  bool wide = false;           // 64-bit tile and coordinate arithmetic (always with symbols)
  bool symbolic = false;       // a size is symbolic: tile count, bounds and grid per call
  int load_lanes = 0;          // staged loads as vector words of this many elements (0: scalar)
  int store_lanes = 0;         // stores likewise

  Dim tiles() const;     // per call when symbolic
  uint32_t grid() const;  // at the hints
};

// The plan for kernel `k`, or nullopt when the elementwise shape stays: the kernel has
// one stage and no reductions or scans; every stored buffer (`in_memory`) has the same
// affine index with one unit-stride loop dim S; some load not written by this kernel is
// affine, in bounds over the whole loop space, unit-stride along another dim L, and
// varies along S (a transposed read, not a broadcast); and a tile holds at least a
// block's worth of elements. Loads unit-stride along L are staged (the largest first,
// within kTransposeSharedBytes); any other load is read where it is used.
std::optional<TransposePlan> plan_transpose(const Program& p, const Kernel& k, const std::vector<bool>& in_memory);

// Element (l, s) of a staged tile in shared memory: rows along the tile's shorter side,
// padded to an odd number of words, so that both phases' warps touch distinct banks.
// With vector accesses, a thread's group is 8 (or 4) consecutive elements of its phase's
// order, and 32 threads 8 elements apart would share 4 banks: one more word every 8
// (`spread`) puts them 9 apart.
struct TileLayout {
  bool rows_along_store;  // element at l * row + s (else s * row + l)
  bool spread;
  int64_t row, size;
  explicit TileLayout(const TransposePlan& t);
  std::string at(const std::string& l, const std::string& s) const;  // the element's index, as C
};

// The affine form of an index whose coefficients may be sizes over the symbols
// (affine_form's, as Dims, where it has one).
std::optional<SymbolicAffine> index_form(const Expr& index);
Dim coef_of(const SymbolicAffine& f, int var);

// The coefficient c of `side` in `f` when f sees the side as one dim (each of the side's
// dims at c times the product of the sizes before it), else nullopt.
std::optional<Dim> side_coef(const SymbolicAffine& f, const TransposePlan::Side& side);

}  // namespace ember
