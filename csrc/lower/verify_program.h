// Checks the invariants program.h states, between passes (tests and debug builds:
// PipelineOptions::verify). A violation is a compiler bug: it throws std::logic_error
// naming the pass that left it and what is wrong.
//
//   buffers       ids are their indices; each kind has what it needs (an input's index,
//                 an extern buffer's call and output); sizes and strides of one rank
//   computed      one per buffer, of a computed buffer, sizes equal to the buffer's; one
//                 var per dim, an order that is a permutation, one reduce var per reduced
//                 dim; bodies use only their own vars
//   steps         each extern call once, each computed entry at most once
//   order         every load, extern argument and output reads an input or a buffer an
//                 earlier step computed (lowering order is an execution order)
#pragma once
#include <string>

#include "lower/program.h"

namespace ember {

void verify_program(const Program& p, const std::string& after_pass);

}  // namespace ember
