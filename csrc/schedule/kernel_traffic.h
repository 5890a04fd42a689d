// kernel_traffic: the bytes each kernel of a schedule must move between memory and the
// chip, at given symbol values: what it reads from buffers other kernels (or the caller)
// wrote, and what it stores. Divided by a kernel's device time, it is the bandwidth the
// kernel achieved, which the suite (benchmarks/suite/bandwidth.py) compares with a
// device-to-device copy's.
//
// The count is the ideal one (each element the kernel needs, once), not what the kernel's
// loops happen to fetch: a row read again by a later stage, a column split's scratch or
// a cache miss are the kernel's inefficiency, not bytes it had to move.
//
//   writes  each of its items whose buffer is in memory: the item's elements (its
//           buffer's numel) times the dtype's size.
//   reads   each distinct Load (buffer, index expression) of a buffer the kernel does not
//           compute: at most the number of distinct values of the loop vars its index
//           reads (the product of their trip counts: exact for the usual injective index,
//           an upper bound for a gather or a broadcast), summed over a buffer's distinct
//           loads and capped at the elements its layout spans (a stencil or a roll reads
//           a buffer once; slices of a buffer read only their part).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

struct BufferTraffic {
  int buffer = -1;
  int64_t bytes = 0;
};

struct KernelTraffic {
  std::string name;
  std::string kind;                  // "scan", "reduction" or "pointwise" (its items)
  std::vector<BufferTraffic> reads;  // in buffer id order
  std::vector<BufferTraffic> writes;
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
};

// Per kernel of `s` (parallel to s.kernels), at symbol values `symbols` (the graph's
// hints for a static view); `in_memory` is the placement (Compiled::buffer_in_memory).
std::vector<KernelTraffic> kernel_traffic(const Program& p, const Schedule& s, const std::vector<bool>& in_memory,
                                          const std::vector<int64_t>& symbols);

}  // namespace ember
