#pragma once
#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

struct FuseOptions {
  bool enabled = true;  // false: one kernel per computed buffer (for debugging)
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
