// Named passes of the pipeline (pipeline.cpp) on IR text: a pass test is the text before
// and the text expected after that pass alone, and ember-opt (tools/ember_opt.cpp) runs
// them from the command line.
//
// The text in is a graph (`graph {...}`, ir/graph.h), a program (`program(...)`,
// lower/program_text.h), or a program, a line `schedule`, and its schedule
// (schedule/schedule_text.h). What comes out is the IR after the last pass: the program
// after lower_graph, pad_matmuls and eliminate_dead_code; the program, `schedule` and
// the schedule after fuse, merge_inner_dims, merge_symbolic_outer_dims, split_reductions
// and name_kernels (which reads the graph's ops: start it from graph text); the dump of
// schedule_cuda, generate_c, generate_cuda or plan_arena.
// opts.target picks the lowering's and the memory plan's target; schedule_cuda and
// generate_cuda imply CUDA. With opts.verify the IR is checked before and after each
// pass.
#pragma once
#include <string>
#include <vector>

#include "pipeline.h"

namespace ember {

std::string run_passes(const std::string& text, const std::vector<std::string>& passes,
                       const PipelineOptions& opts = PipelineOptions::cpu());

// The IR a program or schedule pass leaves: the program, and after fusion `schedule`
// and the schedule (run_passes' input form).
std::string state_text(const Compiled& c);

}  // namespace ember
