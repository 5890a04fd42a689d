// The passes every target shares: graph text -> Graph -> Program -> Schedule.
//
//   parse -> lower -> [pad matmuls] -> eliminate dead code -> fuse -> merge inner dims
//   -> [merge symbolic outer dims]
//
// Each target (CompiledGraph for CPU, CudaCompiledGraph for CUDA) runs this, then its
// own passes: split reductions and C for the CPU, CUDA C for the GPU. Padding matmul
// operands is for cuBLAS: CUDA graphs ask for it (the CPU graph only in tests).
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/lowering.h"
#include "lower/pad_matmuls.h"
#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

// The IR as text after one step of the pipeline, kept when a debug dump is asked for.
struct PassDump {
  std::string pass;   // the step's name in the pipeline, e.g. "fuse"
  std::string text;   // graph, program, schedule, memory plan or source
};

struct PhaseTimes {
  double parse = 0, lower = 0, schedule = 0, codegen = 0, compile = 0, load = 0;
};

struct FrontEnd {
  Graph graph;
  Program program;
  Schedule schedule;
  PhaseTimes times;              // parse, lower, schedule
  std::vector<PassDump> passes;  // empty unless `dump`
};

struct FrontEndOptions {
  bool fuse = true;
  LowerOptions lower;             // the target's lowering choices (the CPU takes the defaults)
  bool pad_matmuls = false;       // run pad_matmuls after lowering, with these settings:
  PadMatmulOptions pad;
  bool merge_symbolic_outer_dims = false;  // CUDA: schedule/merge_outer_dims.h
  bool dump = false;              // keep the IR after each step in FrontEnd::passes
};

FrontEnd run_front_end(const std::string& graph_text, const FrontEndOptions& opts);

double seconds_since(std::chrono::steady_clock::time_point t0);
// Writes the dumps as <dir>/<i>_<pass><ext>, ext `source_ext` for the pass named
// `source_pass` (the generated source) and .txt for the others.
void write_pass_dumps(const std::vector<PassDump>& passes, const std::string& dir, const std::string& source_pass,
                      const std::string& source_ext);

}  // namespace ember
