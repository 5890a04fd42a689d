// One iteration of a stage's loop, as both printers write it: each item's value, then
//   a scan        its running value updated, rounded to the stored dtype, stored (when in
//                 memory), and bound as the element's local;
//   a reduction   accumulated (codegen/accumulator.h);
//   a pointwise   stored (when in memory) and bound as the local later items read;
//   a scatter-add added atomically at its offset (CUDA only: ember_scatter_add).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "codegen/accumulator.h"
#include "codegen/c_emitter.h"
#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

struct StageItems {
  const Program& p;
  const Stage& stage;
  const std::vector<bool>& in_memory;  // per buffer
  std::vector<Acc>& accs;              // per item: the reductions' and scans' accumulators
  // An arg-reduction's element index, as C text (asked for when one is accumulated).
  std::function<std::string()> arg_index;
  // What a pointwise store is prefixed with (a per-row value stored by one thread).
  std::string store_prefix;
  // Items not printed here (empty: none), e.g. the values a CUDA per-row stage prints
  // at the row's scope, outside its loop (codegen/cuda/row.cpp).
  std::function<bool(const KernelItem&)> skip = nullptr;
};

// Prints the items into the current scope; returns whether anything was stored.
bool print_stage_items(CEmitter& em, const StageItems& items);

}  // namespace ember
