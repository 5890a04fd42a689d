#pragma once
#include <cstdint>
#include <limits>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

struct FuseOptions {
  bool enabled = true;  // false: one kernel per computed buffer (for debugging)
  // A pointwise buffer with more work per row than `long_row_work` (inner iterations)
  // does not join a kernel that has at most `few_rows` rows and fewer than it would
  // have alone: rows are what run in parallel (the CPU's OpenMP threads, the GPU's
  // blocks), and a kernel with few rows, after a full or per-group reduction, would
  // run the whole buffer on a few of them. The CPU's figures (the default) keep a
  // thread's row below 64k iterations whatever the row count. CUDA's (cuda()) keep a
  // kernel of at most 256 rows (fewer blocks than two an SM) from taking rows longer
  // than 32,768 elements: the sizes from which split_long_reductions splits a
  // reduction's rows (lower/split_long_reductions.h), so that a GroupNorm's
  // normalization does not undo its statistics' split, while a decode step's RMSNorm
  // (one row of 8,192) stays one kernel; and there a pointwise
  // kernel of its own runs every element in parallel (the elementwise shape), so it
  // always has more rows than such a kernel (`elementwise_alone`).
  int64_t long_row_work = int64_t{1} << 16;
  int64_t few_rows = std::numeric_limits<int64_t>::max();
  bool elementwise_alone = false;
  // A vector (column) reduction with more than `long_row_work` iterations a row does not
  // join a kernel of at most `few_rows` rows that computes a reduction it reads. CUDA runs
  // such a reduction as a column split (schedule/cuda/column_split.h): its chunks on many
  // blocks, then their combine; the split's first launch runs none of the kernel's other
  // stages, so a reduction reading another of the same kernel (a training BatchNorm's
  // variance, which reads its mean) ran on the kernel's own blocks: one block for a
  // channels-last BatchNorm's statistics, 171 ms a call for ResNet-50's first on an H200.
  bool separate_dependent_columns = false;

  static FuseOptions cuda(bool enabled = true) { return FuseOptions{enabled, int64_t{1} << 15, 256, true, true}; }
};

// Groups the Program's computed buffers into kernels (see kernel.h for the
// kernel shape and the legality rules) and orders kernels and extern calls.
//
// Greedy, in program order: a buffer joins the most recent kernel that (a) runs
// no earlier than everything it depends on, (b) has a compatible loop shape, and
// (c) where every read of a buffer of that kernel hits the element this thread
// produced. Otherwise it starts a new kernel at the end.
Schedule fuse(const Program& p, const FuseOptions& opts = {});

}  // namespace ember
