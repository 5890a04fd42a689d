// What the parts of the CUDA printer share while printing one kernel: the kernel, where
// its buffers live, its schedule (schedule/cuda/schedule_cuda.h), and the expression
// printer whose scopes its body is printed in; and the small helpers they all use. The
// driver (kernel.cpp) makes one CudaPrinter a kernel and hands it to each shape's
// body: elementwise.h, vector_path.h, row.h (with row_tile.h and
// column_split.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/c_emitter.h"
#include "lower/program.h"
#include "schedule/cuda/schedule_cuda.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

// The innermost inner var at the first lane of a group of consecutive elements (vector
// accesses): an id no kernel var has.
constexpr int kFirstLaneVar = kInnerVarBase + (1 << 20);

struct CudaPrinter {
  CudaPrinter(const Program& p, const Schedule& s, const Placement& m, const CudaKernelSchedule& ks)
      : p(p), s(s), m(m), ks(ks), ki(ks.kernel), k(s.kernels[ks.kernel]), launch(ks.launch) {}

  const Program& p;
  const Schedule& s;
  const Placement& m;
  const CudaKernelSchedule& ks;  // every decision
  const int ki;                  // the kernel's index in s.kernels
  const Kernel& k;               // s.kernels[ki]
  const CudaLaunch& launch;      // ks.launch
  std::unique_ptr<CEmitter> em;  // made by signature(): reads that function's parameters
  std::string scratch_name;      // the scratch buffer's parameter, once signature() named it
  // statistic_buffers(p), for the emitters signature() makes (CEmitter::set_statistics);
  // null: none marked (every product may contract).
  const std::vector<bool>* statistics = nullptr;

  // `extern "C" __global__ void fname(params) {` over `args`, and a fresh emitter that
  // reads them. The scratch buffer, if any, is raw bytes.
  // `min_blocks` > 0 adds __launch_bounds__'s minimum blocks per SM (a register cap).
  // In a graph with symbols the last parameter is `const ember_syms sym`.
  std::string signature(const std::string& fname, uint32_t block, const std::vector<int>& args, int min_blocks = 0);
  // A whole function: `head`, the emitter's function-level lines, `body`, the brace.
  std::string function(const std::string& head, const std::vector<std::string>& body) const;

  std::string index_type() const { return launch.wide ? "int64_t" : "int"; }
  // A size as C: its value, or (a graph with symbols) an expression over `sym`,
  // computed once at the top of the function.
  std::string size_text(const Dim& d) const;
  // decompose() over sizes that may be symbolic.
  std::vector<std::string> decompose_dims(const std::string& flat, const Dims& sizes, const std::string& prefix,
                                          size_t first = 0) const;
  std::vector<std::pair<int, std::string>> outer_vars() const;
  std::vector<std::pair<int, std::string>> inner_vars(const Stage& st) const;
  // Loads of buffers this kernel writes are valid only after the stage that writes them
  // (and its barrier), so they may be hoisted to the row scope but no further.
  void pin_own_loads();
};

// By buffer id: whether the buffer is a reduction's (or scan's) result, or is computed
// from one (its body loads such a buffer): the values a product's rounding error must not
// meet in a sum (CEmitter::set_statistics). Extern results and inputs are not.
std::vector<bool> statistic_buffers(const Program& p);

// `flat` split into coordinates over `sizes` (row-major), one `const int64_t` line per
// dim named prefix + d. The divisions run in the type of `flat` (32-bit where sizes allow).
// The names are numbered from `first`.
std::vector<std::string> decompose(const std::string& flat, const std::vector<int64_t>& sizes, const std::string& prefix,
                                   size_t first = 0);

}  // namespace ember
