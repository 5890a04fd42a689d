// Checks the invariants kernel.h states of a Schedule over its Program, between passes
// (tests and debug builds: PipelineOptions::verify). Throws std::logic_error naming the
// pass that broke one.
//
//   steps      each kernel once; each extern call of the program once, in the program's
//              relative order of its extern calls
//   items      every computed entry the program's steps compute is one item, and nothing
//              else; an item's flags are its computed buffer's (reduction, scan)
//   loop vars  items use only their kernel's outer vars and their stage's inner vars
//   stages     a vector stage holds reductions only; a split stage holds a reduction and
//              no scan
//   order      an item reads a buffer of its own kernel only from an earlier stage, or
//              from its own stage when that buffer is not a reduction; a buffer of
//              another kernel only when that kernel runs earlier
#pragma once
#include <string>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

void verify_schedule(const Schedule& s, const Program& p, const std::string& after_pass);

}  // namespace ember
