#pragma once
#include "lower/program.h"

namespace ember {

// Removes computed buffers that no output, extern call or live buffer reads
// (e.g. the indices of a max-pool nobody asked for).
void eliminate_dead_code(Program& p);

}  // namespace ember
