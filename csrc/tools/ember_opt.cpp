// ember-opt: runs named passes of the pipeline on IR text and prints the IR after them
// (run_passes.h says which texts go in and come out).
//
//   ember-opt [--cuda] PASS[,PASS...] [FILE]       FILE, or the standard input
//
// e.g. `ember-opt lower_graph,eliminate_dead_code graph.txt`, then
// `ember-opt fuse program.txt`. The IR is checked before and after each pass.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "run_passes.h"

int main(int argc, char** argv) {
  ember::PipelineOptions opts = ember::PipelineOptions::cpu();
  opts.verify = true;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--cuda") {
    opts = ember::PipelineOptions::cuda();
    opts.verify = true;
    args.erase(args.begin());
  }
  if (args.empty() || args.size() > 2) {
    std::cerr << "usage: ember-opt [--cuda] PASS[,PASS...] [FILE]\n";
    return 2;
  }
  std::vector<std::string> passes;
  std::stringstream names(args[0]);
  for (std::string name; std::getline(names, name, ',');)
    if (!name.empty()) passes.push_back(name);
  std::stringstream text;
  if (args.size() == 2) {
    std::ifstream f(args[1]);
    if (!f) {
      std::cerr << "ember-opt: cannot read " << args[1] << "\n";
      return 2;
    }
    text << f.rdbuf();
  } else {
    text << std::cin.rdbuf();
  }
  try {
    std::cout << ember::run_passes(text.str(), passes, opts);
  } catch (const std::exception& e) {
    std::cerr << "ember-opt: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
