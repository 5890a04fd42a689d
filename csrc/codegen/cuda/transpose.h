// The tiled-transpose shape's body (its plan: schedule/cuda/transpose_plan.h). A block
// takes a tile of tile_load x tile_store elements: each staged load is read with
// consecutive threads walking L (coalesced) into shared memory; after a barrier,
// consecutive threads walk S, take the staged values from shared memory, evaluate the
// kernel's items (the other loads read directly) and store (coalesced). Where the plan
// has lanes, a phase moves 16 bytes per access when the pointers are aligned.
#pragma once
#include <string>
#include <vector>

#include "codegen/c_emitter.h"
#include "lower/program.h"
#include "schedule/cuda/transpose_plan.h"
#include "schedule/kernel.h"

namespace ember {

// The kernel body for `plan` (after the signature), emitted through `em`, whose buffer
// names are the kernel's parameters.
std::vector<std::string> transpose_body(const TransposePlan& plan, const Program& p, const Kernel& k,
                                        const std::vector<bool>& in_memory, CEmitter& em);

}  // namespace ember
