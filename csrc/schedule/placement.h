// Which buffers a schedule's kernels keep in memory, and which reads a kernel serves
// from a value it already holds (a fused producer's register or local), shared by the
// C and CUDA printers.
#pragma once
#include <vector>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

struct Producer {
  int kernel = -1, stage = -1, item = -1;
};

// Where a vector stage's per-lane results live for later stages of their kernel: the C
// printer keeps them in arrays (local); the CUDA printer spreads lanes over a row's
// threads differently from any later stage's elements, so they go through memory.
enum class VectorResults { Local, InMemory };

struct Placement {
  std::vector<bool> in_memory;     // per buffer
  std::vector<Producer> producer;  // per buffer: the kernel item that computes it
  // Per buffer: the kernel that computes it, when that kernel's own later stages are all
  // that read it from memory (no other kernel, extern or output does); else -1. A kernel
  // that keeps such a value in registers need not store it (schedule_cuda).
  std::vector<int> own_reads_only;
};

// Whether stage `stage` of kernel `kernel` reads the value `prod` computes without memory.
bool read_is_local(const Producer& prod, const Schedule& s, int kernel, int stage, VectorResults vector);

// In memory: inputs, extern results and arguments, graph outputs, and every buffer some
// kernel reads other than locally.
Placement place_buffers(const Program& p, const Schedule& s, VectorResults vector);

}  // namespace ember
