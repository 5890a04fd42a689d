// Helpers for tests: the pipeline on graph text, golden files.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "pipeline.h"
#include "record_graph.h"

namespace ember_test {

// The pipeline that ships (pipeline.h) on graph text, for the CPU by default.
struct Pipeline : ember::Compiled {
  explicit Pipeline(const std::string& text, ember::PipelineOptions opts = ember::PipelineOptions::cpu())
      : ember::Compiled(ember::run_pipeline(recorded(text), opts)) {}
};

// The same for CUDA (PipelineOptions::cuda(): channels-last activations, padded matmuls).
struct CudaPipeline : ember::Compiled {
  explicit CudaPipeline(const std::string& text, ember::PipelineOptions opts = ember::PipelineOptions::cuda())
      : ember::Compiled(ember::run_pipeline(recorded(text), opts)) {}
};

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
