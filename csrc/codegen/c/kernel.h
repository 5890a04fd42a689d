// C source for a Schedule: one exported function per kernel (kernels whose text differs
// only in the buffers they take share one; KernelInfo::function),
//   void NAME(int64_t begin, int64_t end, char* const* args)
// computing rows [begin, end) of the kernel's outer loop. The runtime splits
// rows across threads; args[i] is the base pointer of buffer `args[i]` below.
// In a graph with symbols, args[args.size()] points to the call's symbol values
// (int64_t[]), which the kernel reads as sym[k].
#pragma once
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

struct KernelInfo {
  std::string name;
  std::string function;            // the C function that runs it: `name`, or an earlier
                                   // kernel's whose text is the same but for its buffers
  Dim rows = 1;                    // outer_numel (symbolic: evaluated per call)
  int64_t work_per_row = 1;        // inner iterations per row, all stages
  std::vector<int> args;           // buffer ids, in argument order
  std::vector<int> origins;        // graph nodes whose work the kernel does
  std::vector<std::string> generic;  // what codegen did generally because a size is symbolic
};

struct GeneratedCode {
  std::string source;                       // the prelude, then each kernel's text
  std::vector<size_t> kernel_begin;         // where kernel k's text starts in source
  std::vector<KernelInfo> kernels;          // parallel to Schedule::kernels
  std::vector<bool> buffer_in_memory;       // per Program buffer
};

GeneratedCode generate_c(const Program& p, const Schedule& s);

}  // namespace ember
