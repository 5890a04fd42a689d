// Where a graph with symbolic sizes is compiled less well than the same graph at its
// hints: the pipeline runs the graph's static twin (at_hints, ir/graph.h) up to the
// schedule and compares, per computed buffer, what each schedule chose. Whatever a
// symbol changed -- an op left to ATen, a reduction not vectorized or not split over
// threads, inner dims not merged, a CUDA kernel without its transpose tiles, vector
// words, row tiles, hoisted values or column split -- is a generic path, reported by
// `ember explain` and counted by ember.stats() (docs/dynamic_shapes.md). The pass
// decides nothing: codegen never reads its result.
#pragma once
#include <string>
#include <vector>

namespace ember {

struct Compiled;
struct PipelineOptions;

struct GenericPath {
  std::string kernel;  // the symbolic schedule's kernel; empty: the graph as a whole
  std::string what;    // what it does instead, and which size is symbolic
};

// The generic paths of `c` (a compiled graph with symbols, every pass before codegen's
// done; codegen's own notes, GeneratedCode's KernelInfo::generic, are added when present).
// Never throws: a static twin that fails to compile is one graph-level line.
std::vector<GenericPath> find_generic_paths(const Compiled& c, const PipelineOptions& opts);

std::string generic_paths_text(const std::vector<GenericPath>& paths);

}  // namespace ember
