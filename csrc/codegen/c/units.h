// A graph's C source cut into translation units that the C compiler builds side by side.
//
// The C compiler is the longest part of a cold compile (GCC takes ~1 s for a GPT-2
// backward graph of 22 kernels, one process, one core). Each unit is the prelude (a few
// hundred lines; ~20 ms to compile) followed by a contiguous run of kernels; units are
// balanced by bytes of kernel text. Kernels are independent functions, so the units link
// into the same library the whole source would make; the cache key stays the whole
// source's.
#pragma once

#include <string>
#include <vector>

#include "codegen/c/kernel.h"

namespace ember {

// Kernel text per unit below which a further split costs more than it saves.
constexpr size_t kMinUnitBytes = 12 * 1024;
// No more units than this, however many cores.
constexpr int kMaxUnits = 8;

// How many units `code` is best compiled as with `cores` cores: one per kMinUnitBytes of
// kernel text, at most one per core (and kernel, and kMaxUnits), at least one.
int unit_count(const GeneratedCode& code, int cores);

// `code.source` as `count` units (the whole source when count <= 1 or there is at most one kernel).
std::vector<std::string> split_units(const GeneratedCode& code, int count);

}  // namespace ember
