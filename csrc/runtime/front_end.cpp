#include "runtime/front_end.h"

#include <fstream>

#include "lower/lowering.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"
#include "schedule/merge_outer_dims.h"

namespace ember {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

FrontEnd run_front_end(const std::string& graph_text, const FrontEndOptions& opts) {
  FrontEnd fe;
  auto after = [&](const char* pass, auto&& text) {
    if (opts.dump) fe.passes.push_back({pass, text()});
  };
  auto program_text = [&] { return print_program(fe.program, fe.graph); };
  auto schedule_text = [&] { return print_schedule(fe.schedule, fe.program, fe.graph); };

  auto t0 = std::chrono::steady_clock::now();
  fe.graph = parse_graph(graph_text);
  fe.times.parse = seconds_since(t0);
  after("parse_graph", [&] { return print_graph(fe.graph); });

  t0 = std::chrono::steady_clock::now();
  fe.program = lower_graph(fe.graph, opts.lower);
  double lowering = seconds_since(t0);
  after("lower_graph", program_text);
  t0 = std::chrono::steady_clock::now();
  if (opts.pad_matmuls) {
    pad_matmuls(fe.program, fe.graph, opts.pad);
    lowering += seconds_since(t0);
    after("pad_matmuls", program_text);
    t0 = std::chrono::steady_clock::now();
  }
  eliminate_dead_code(fe.program);
  fe.times.lower = lowering + seconds_since(t0);
  after("eliminate_dead_code", program_text);

  t0 = std::chrono::steady_clock::now();
  FuseOptions fo;
  fo.enabled = opts.fuse;
  fe.schedule = fuse(fe.program, fo);
  double fusing = seconds_since(t0);
  after("fuse", schedule_text);
  t0 = std::chrono::steady_clock::now();
  merge_inner_dims(fe.schedule);
  after("merge_inner_dims", schedule_text);
  if (opts.merge_symbolic_outer_dims && !fe.graph.symbols.empty()) {
    merge_symbolic_outer_dims(fe.schedule);
    after("merge_symbolic_outer_dims", schedule_text);
  }
  fe.times.schedule = fusing + seconds_since(t0);
  return fe;
}

void write_pass_dumps(const std::vector<PassDump>& passes, const std::string& dir, const std::string& source_pass,
                      const std::string& source_ext) {
  for (size_t i = 0; i < passes.size(); ++i) {
    const PassDump& p = passes[i];
    std::ofstream f(dir + "/" + std::to_string(i) + "_" + p.pass + (p.pass == source_pass ? source_ext : ".txt"),
                    std::ios::binary);
    f << p.text;
  }
}

}  // namespace ember
