// The Elementwise shape's vector path, printed from its plan (schedule/cuda/vector_plan.h):
// the words loaded, the lanes computed in registers, the stores; the hoisted values
// before the grid-stride loop. Printed before the scalar loop (elementwise.h),
// which runs when the vector path's run-time checks fail.
#pragma once
#include <string>
#include <vector>

#include "codegen/cuda/printer.h"
#include "schedule/cuda/vector_plan.h"

namespace ember {

// The vector path, taken when every vector pointer is 16-byte aligned (checked at run
// time: a view of a tensor may not be) and, when values are hoisted, the launch's
// grid-stride step is plan_hoist's; it returns, else the scalar loop after it runs.
// Nothing when vec.lanes == 0.
std::vector<std::string> elementwise_vector_body(CudaPrinter& pr, const VectorPlan& vec);

}  // namespace ember
