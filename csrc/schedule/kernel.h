// Fusion decisions as data: which computed buffers share a kernel and how its
// loops are laid out.
//
// A Kernel is a parallel loop over `outer` (a row index, split across threads)
// containing a sequence of Stages. Each Stage is a loop nest over its own
// `inner` sizes (empty: computed once per row) that computes its items in order:
// pointwise items store (or hand to later items as locals) one element per
// iteration; reduction items accumulate and finish after the loop.
//
// Legality, established by fuse() and relied on by codegen:
// - an item reads a buffer produced in the same kernel only at that buffer's own
//   store index (the same element, so the same thread produced it);
// - a reduction's result is read only by later stages; a pointwise item is read
//   in its own stage (as a local) or by a later stage with the same inner sizes;
//   a vector reduction's result only by later stages with the same inner[0];
// - a scatter-add item is alone in its kernel's only stage.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "lower/program.h"

namespace ember {

struct KernelItem {
  int computed = -1;   // index into Program::computed
  Expr value;          // body in kernel loop vars
  Expr store_index;    // element offset into its buffer, in kernel loop vars
  bool is_reduction = false;
  // A scan: accumulates along the stage's loop like a reduction but stores every
  // step, so readers treat it like a pointwise item (same stage: the running value).
  bool is_scan = false;
  // A scatter-add (ComputedBuffer::add_at): adds `value` atomically at `store_index`, which
  // loads indices. Such an item has a kernel of its own, which nothing joins, and whose
  // first launch zeroes the buffer (schedule_cuda).
  bool scatter_add = false;
};

struct Stage {
  Dims inner;
  std::vector<KernelItem> items;
  // A vector reduction: inner[0] is a kept (not reduced) dim, contiguous in
  // memory, looped innermost and vectorized; inner[1..] are reduced dims looped
  // outside it. Reductions accumulate into arrays indexed by inner var 0, and later
  // stages whose inner[0] is the same dim read them as acc[i0]. Only reductions.
  bool vector_reduce = false;
  // > 1: the stage's reductions run as up to this many chunks of its outermost
  // reduced dim (inner[1] of a vector stage, inner[0] of a row stage) on OpenMP
  // threads, each with its own partials, combined in chunk order
  // (split_reductions). Chunk bounds are fixed at compile time, so results do not
  // depend on the thread count. Only stages with reductions and no scan.
  int split = 0;
};

struct Kernel {
  std::string name;
  Dims outer;
  std::vector<Stage> stages;

  Dim outer_numel() const;
  bool scatter_adds() const;  // whether an item is a scatter-add (then all are)
  int64_t work_per_row() const;  // sum over stages of the inner loop trip counts (at the hints)
};

struct Schedule {
  struct Step {
    enum class Kind : uint8_t { Kernel, Extern };
    Kind kind;
    int index;  // into kernels or Program::externs
  };
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
};


}  // namespace ember
