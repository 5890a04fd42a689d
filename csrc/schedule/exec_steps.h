// How a compiled graph runs, shared by the CPU and CUDA graphs: the schedule's kernels
// grouped into steps (consecutive kernels are one call from Python), and the arena that
// intermediates share by lifetime.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/dim.h"
#include "lower/program.h"
#include "schedule/kernel.h"
#include "schedule/memory_plan.h"

namespace ember {

struct ExecStep {
  enum class Kind : uint8_t { Kernels, Extern };
  Kind kind = Kind::Kernels;
  int extern_call = -1;          // Extern: index into Program::externs
  std::vector<int> kernels;      // Kernels: indices into kernel list, in order
  std::vector<int> args;         // Kernels: buffer ids whose pointers the group takes
};

struct StepPlan {
  std::vector<ExecStep> steps;
  // Per step, per kernel: positions of the kernel's args within the step's args.
  std::vector<std::vector<std::vector<int>>> arg_slots;
};

// Consecutive kernels form one step, which takes the union of their buffers once;
// kernel_args[k] are kernel k's buffer ids in parameter order.
StepPlan group_steps(const Schedule& s, const std::vector<std::vector<int>>& kernel_args);

// An arena candidate: a computed buffer in memory that never leaves the graph, its
// size in bytes (symbolic in a graph with symbols) and the steps that touch it.
struct SizedLifetime {
  int buffer = -1;
  Dim bytes;
  int first = 0, last = 0;
};
std::vector<SizedLifetime> arena_lifetimes(const Program& p, const std::vector<ExecStep>& steps,
                                           const std::vector<bool>& buffer_in_memory);
// The arena for the given symbol values (empty for a static graph). Kernels of one
// thread (CPU) or stream (CUDA) run in order, so lifetimes in steps are real ones.
MemoryPlan place_arena(const std::vector<SizedLifetime>& lifetimes, int num_buffers,
                       const std::vector<int64_t>& symbols);

}  // namespace ember
