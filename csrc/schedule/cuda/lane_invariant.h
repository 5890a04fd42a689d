// Values of an elementwise kernel that depend only on its innermost index.
//
// When a grid-stride thread's innermost coordinate is the same in every step (the
// step is a multiple of the innermost extent), such a value can be computed once per
// thread, before the loop, and reused: on channels-last activations, a BatchNorm's
// per-channel `1 / sqrt(var + eps)` is one per channel, not one per element.
#pragma once
#include <functional>
#include <vector>

#include "ir/expr.h"

namespace ember {

struct InvariantValue {
  Expr value;
  int64_t cost = 0;  // what evaluating it costs, in ops (sqrt, division, libm calls: 8; other arithmetic: 1)
};

// The largest subexpressions of `roots` that depend on var `v` and on nothing else that
// changes from element to element (another var, a load of a buffer `readable` refuses),
// worth a register (cost at least 2), most costly first (then in order of appearance).
// Left out, so that moving them keeps every result bit for bit:
//  - values met only inside a Where branch (the branch's loads may be out of bounds when
//    it is not taken; the emitter clamps them there, not before the loop);
//  - values containing a float product that is an operand of a float sum or difference
//    (NVRTC runs with --fmad=true, csrc/jit/nvrtc.cpp: which products fuse into an fma is
//    the compiler's choice per expression DAG, so moving one could change its rounding).
std::vector<InvariantValue> innermost_invariants(const std::vector<Expr>& roots, int v,
                                                 const std::function<bool(int)>& readable);

// Whether e depends on no var other than `v` and reads no buffer.
bool depends_only_on(const Expr& e, int v);

}  // namespace ember
