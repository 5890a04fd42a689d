// name_kernels: each kernel named after what it does, as the generated code, the fusion
// plan, logs and profiler traces show it (the C function and its _launch, the CUDA
// function and its _partial, the runners' record_function ranges):
//
//   ember_<kind>_<ops>_<index>            ember_red_var_mean_rsqrt_add_sub_plus1_3
//
//   kind   poi   no reduction: pointwise work, copies, gathers, unrolled pooling
//          red   reductions (a row's or, in vector stages, across rows)
//          per   CUDA: reductions whose rows stay in registers across the stages (a row
//                tile with slots: the row is read from memory once; Inductor's
//                "persistent reduction")
//          scan  a scan (cumsum, cumprod)
//   ops    the ATen ops whose work the kernel does (its items' origins), each once:
//          ops that only move or relabel data or make constants (view, permute, expand,
//          clone, _to_copy, full, arange ...) are left out unless that is all the kernel
//          does; the others in graph order, reductions and functions (var_mean, rsqrt,
//          erf, exp) before plain arithmetic and selects (add, mul, where); at most
//          kMaxNamedOps, then plus<N> for the N not named; "copy" for a kernel of no
//          op's work (a layout copy for an extern operand, matmul padding). Sanitized to
//          C identifier characters, each op at most 24 of them.
//   index  the kernel's position in the schedule: unique in the graph, and the N of
//          the short name ember_k<N>, which descriptive=false keeps
//          (ember.config.descriptive_names = False).
//
// A name is a function of the graph and its schedule only: the same graph gets the same
// names in every process, so its kernel cache keys are stable. Kernels that differ only
// in their names still share one compiled function (generate_c and generate_cuda compare
// kernel texts with the name taken out).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/program.h"
#include "schedule/cuda/schedule_cuda.h"
#include "schedule/kernel.h"

namespace ember {

constexpr int kMaxNamedOps = 4;

// ember_k<index>: fusion's name for a kernel, and every name with descriptive=false.
std::string short_kernel_name(int index);

// ember_<kind>_<ops>_<index> from ATen overload names in graph order ("aten.add.Tensor").
std::string descriptive_kernel_name(const std::string& kind, const std::vector<std::string>& ops, int index);

// Names every kernel of `s` (and its CUDA schedule's copy of the name, when `cs` is given:
// the CUDA path names kernels after schedule_cuda, whose row tiles make "per").
void name_kernels(Schedule& s, const Program& p, const Graph& g, CudaSchedule* cs, bool descriptive);

}  // namespace ember
