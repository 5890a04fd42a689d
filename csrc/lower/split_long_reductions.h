// Long reductions into few results run as two reductions: partials over chunks, then
// the partials.
//
// The CUDA path gives each row of a reduction kernel one block (a warp for short rows):
// a reduction with fewer results than the GPU has SMs leaves most of them idle however
// long its rows are. A training step's loss (the mean of a whole output: one row, one
// block reading GPT-2's 411 MB of logits) and a GroupNorm's statistics (a row per
// sample and group: 64 blocks for poolformer's batch of 64) are such reductions, and
// run at a few percent of the copy bandwidth. Inductor's split reductions answer the
// same (a reduction's chunks on many blocks, then one over the partials).
//
// Here a reduction with at most kSplitMaxResults results whose reduced slice holds at
// least kSplitMinSlice elements, read contiguously along its innermost reduced dim
// (order_reduced_dims runs first), or a long column reduction (below), becomes:
//
//   partials [results..., chunks...] = the same reduction over each chunk of the slice
//   result   [results...]            = the reduction (same op) of its chunks' partials
//
// in the accumulator's dtype, so a sum's mean, a max's NaN and every reader see what
// they saw (rounded in another order). The chunks come from the outermost reduced dims:
// whole dims while their product stays within the wanted count, then a divisor of the
// next dim, so every index stays affine (no division per element) and each chunk keeps
// the contiguous innermost dims. About kSplitTargetBlocks partial rows in all, each of
// at least kSplitMinChunk elements.
//
// Not for scans and arg-reductions, nor graphs with symbols (generic paths compare
// static twins made without this pass). A CUDA pass: the pipeline runs it after
// order_reduced_dims. (The CPU splits the same reductions across its threads inside one
// kernel: schedule/split_reductions.h.)
#pragma once
#include <cstdint>

#include "lower/program.h"

namespace ember {

constexpr int64_t kSplitMaxResults = 256;     // about two blocks per SM on an H100 (132)
constexpr int64_t kSplitMinSlice = 1 << 15;   // shorter slices take a few microseconds on one block
                                              // (FuseOptions::cuda() keeps the same figure)
constexpr int64_t kSplitTargetBlocks = 512;   // partial rows: about four blocks per SM
constexpr int64_t kSplitMinChunk = 1 << 12;   // elements a partial row reduces, at least
// Columns (results contiguous, each reduced over rows strided in memory: a channels-last
// BatchNorm's statistics): partials laid out [chunks, columns], each chunk at least
// kSplitMinColumnRows rows, about kSplitColumnBlocks chunk rows in all (a block each,
// a thread a column, in the partials' kernel), for at most kSplitMaxColumns columns and
// fewer than kSplitColumnBlocks / 8 rows of them, when a reduction reads at least
// kSplitMinColumnWork elements. The CUDA column split (schedule/cuda/column_split.h) then
// takes the reduction of the partials: its block-per-chunk launch cannot hold more chunks
// than one block combines (ResNet-50's training statistics: 256 chunks, 8% of the copy's
// bandwidth on an H200).
constexpr int64_t kSplitMinColumnRows = 32;
constexpr int64_t kSplitColumnBlocks = 2048;
constexpr int64_t kSplitMaxColumns = 1024;
constexpr int64_t kSplitMinColumnWork = int64_t{1} << 22;

void split_long_reductions(Program& p);

}  // namespace ember
