// Helpers for tests: the pipeline on graph text, golden files.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "pipeline.h"
#include "record_graph.h"
#include "run_passes.h"

namespace ember_test {

// The pipeline that ships (pipeline.h) on graph text, for the CPU by default, with the
// IR checked after every pass.
inline ember::Compiled verified_pipeline(const std::string& text, ember::PipelineOptions opts) {
  opts.verify = true;
  return ember::run_pipeline(recorded(text), opts);
}
struct Pipeline : ember::Compiled {
  explicit Pipeline(const std::string& text, ember::PipelineOptions opts = ember::PipelineOptions::cpu())
      : ember::Compiled(verified_pipeline(text, opts)) {}
};

// The same for CUDA (PipelineOptions::cuda(): channels-last activations, padded matmuls).
struct CudaPipeline : ember::Compiled {
  explicit CudaPipeline(const std::string& text, ember::PipelineOptions opts = ember::PipelineOptions::cuda())
      : ember::Compiled(verified_pipeline(text, opts)) {}
};

// How many times `what` occurs in `text` (overlapping occurrences count).
inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Named passes on IR text (run_passes.h), the IR checked before and after each: what a
// pass test runs.
inline std::string after(const std::string& text, const std::vector<std::string>& passes,
                         ember::PipelineOptions opts = ember::PipelineOptions::cpu()) {
  opts.verify = true;
  return ember::run_passes(text, passes, opts);
}

// The schedule of a program-and-schedule text (run_passes' output after a schedule pass).
inline std::string schedule_part(const std::string& state) {
  const size_t at = state.find("\nschedule\n");
  return at == std::string::npos ? std::string() : state.substr(at + 10);
}

// PipelineOptions::cpu() with fusion off, or f16/bf16 results rounded.
inline ember::PipelineOptions unfused() {
  ember::PipelineOptions o;
  o.fuse = false;
  return o;
}
inline ember::PipelineOptions emulating_precision_casts() {
  ember::PipelineOptions o;
  o.emulate_precision_casts = true;
  return o;
}

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
