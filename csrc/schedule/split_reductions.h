#pragma once
#include "schedule/kernel.h"

namespace ember {

// Marks the long reductions of kernels with few rows to run in chunks across
// threads (Stage::split): a BatchNorm's per-channel statistics over N*H*W, a bias
// gradient's column sum, a full sum. The launcher splits rows, so without this
// a kernel with one row runs on one thread however long its reductions are. A kernel
// whose row count is symbolic splits whatever its hint: the launcher chooses per call.
void split_reductions(Schedule& s);

}  // namespace ember
