// Helpers for pass tests: run the passes on graph text and print the results.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/c_kernel.h"
#include "record_graph.h"
#include "ir/graph.h"
#include "lower/lowering.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"
#include "schedule/split_reductions.h"

namespace ember_test {

struct Pipeline {
  ember::Graph graph;
  ember::Program program;
  ember::Schedule schedule;
  ember::GeneratedCode code;

  explicit Pipeline(const std::string& text, bool fuse = true, ember::LowerOptions lower = {}) {
    graph = ember::parse_graph(recorded(text));
    program = ember::lower_graph(graph, lower);
    ember::eliminate_dead_code(program);
    ember::FuseOptions o;
    o.enabled = fuse;
    schedule = ember::fuse(program, o);
    ember::merge_inner_dims(schedule);
    ember::split_reductions(schedule);
    code = ember::generate_c(program, schedule);
  }
  std::string program_text() const { return ember::print_program(program, graph); }
  std::string schedule_text() const { return ember::print_schedule(schedule, program, graph); }
};

// Compares `actual` with tests/cpp/golden/<name>; EMBER_UPDATE_GOLDEN=1 rewrites it.
inline bool matches_golden(const std::string& name, const std::string& actual) {
  std::string path = "tests/cpp/golden/" + name;
  if (const char* u = std::getenv("EMBER_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path) << actual;
    return true;
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (ss.str() != actual) {
    std::cerr << "golden mismatch for " << path << " (EMBER_UPDATE_GOLDEN=1 to accept):\n" << actual << "\n";
    return false;
  }
  return true;
}

}  // namespace ember_test
