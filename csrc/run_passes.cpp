#include "run_passes.h"

#include <functional>
#include <map>
#include <stdexcept>

#include "lower/order_reduced_dims.h"
#include "lower/split_long_reductions.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"
#include "schedule/merge_outer_dims.h"
#include "schedule/name_kernels.h"
#include "schedule/split_reductions.h"

namespace ember {

namespace {

constexpr const char* kScheduleLine = "schedule\n";

// The IR state a text describes.
Compiled parse_state(const std::string& text, const PipelineOptions& opts) {
  Compiled c;
  c.target = opts.target;
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start != std::string::npos && text.compare(start, 5, "graph") == 0) {
    c.graph = parse_graph(text);
    return c;
  }
  size_t split = text.rfind(std::string("\n") + kScheduleLine);
  c.program = parse_program(split == std::string::npos ? text : text.substr(0, split + 1));
  if (split != std::string::npos) c.schedule = parse_schedule(text.substr(split + 1 + 9), c.program);
  if (opts.verify) verify_compiled(c, "parsing");
  return c;
}

enum class Out { Program, Schedule, Dump };

struct NamedPass {
  Out out;
  std::function<void(Compiled&, const PipelineOptions&)> run;
};

const std::map<std::string, NamedPass>& named_passes() {
  static const auto* passes = new std::map<std::string, NamedPass>{
      {"lower_graph", {Out::Program, [](Compiled& c, const PipelineOptions& o) { c.program = lower_graph(c.graph, lower_options(o)); }}},
      {"pad_matmuls", {Out::Program, [](Compiled& c, const PipelineOptions& o) {
         if (c.graph.nodes.empty()) throw std::invalid_argument("pad_matmuls reads the graph: start from graph text");
         pad_matmuls(c.program, c.graph, o.pad);
       }}},
      {"eliminate_dead_code", {Out::Program, [](Compiled& c, const PipelineOptions&) { eliminate_dead_code(c.program); }}},
      {"order_reduced_dims", {Out::Program, [](Compiled& c, const PipelineOptions&) { order_reduced_dims(c.program); }}},
      {"split_long_reductions", {Out::Program, [](Compiled& c, const PipelineOptions&) { split_long_reductions(c.program); }}},
      {"fuse", {Out::Schedule, [](Compiled& c, const PipelineOptions& o) { c.schedule = fuse(c.program, fuse_options(o)); }}},
      {"merge_inner_dims", {Out::Schedule, [](Compiled& c, const PipelineOptions&) { merge_inner_dims(c.schedule); }}},
      {"merge_symbolic_outer_dims", {Out::Schedule, [](Compiled& c, const PipelineOptions&) { merge_symbolic_outer_dims(c.schedule); }}},
      {"split_reductions", {Out::Schedule, [](Compiled& c, const PipelineOptions&) { split_reductions(c.schedule); }}},
      {"schedule_cuda", {Out::Dump, [](Compiled& c, const PipelineOptions&) {
         c.target = Target::CUDA;
         c.cuda_schedule = schedule_cuda(c.program, c.schedule);
       }}},
      {"name_kernels", {Out::Schedule, [](Compiled& c, const PipelineOptions& o) {
         if (c.graph.nodes.empty()) throw std::invalid_argument("name_kernels reads the graph's ops: start from graph text");
         const bool cuda = c.target == Target::CUDA && !c.cuda_schedule.kernels.empty();
         name_kernels(c.schedule, c.program, c.graph, cuda ? &c.cuda_schedule : nullptr, o.descriptive_names);
       }}},
      {"generate_c", {Out::Dump, [](Compiled& c, const PipelineOptions&) { c.c_code = generate_c(c.program, c.schedule); }}},
      {"generate_cuda", {Out::Dump, [](Compiled& c, const PipelineOptions&) {
         c.target = Target::CUDA;
         if (c.cuda_schedule.kernels.empty() && !c.schedule.kernels.empty())
           c.cuda_schedule = schedule_cuda(c.program, c.schedule);
         c.cuda_code = generate_cuda(c.program, c.schedule, c.cuda_schedule);
       }}},
      {"find_generic_paths", {Out::Dump, [](Compiled& c, const PipelineOptions& o) {
         if (c.graph.nodes.empty()) throw std::invalid_argument("find_generic_paths reads the graph: start from graph text");
         c.generic_paths = find_generic_paths(c, o);
       }}},
      {"plan_arena", {Out::Dump, [](Compiled& c, const PipelineOptions&) {
         if (c.target == Target::CPU && c.c_code.kernels.empty() && !c.schedule.kernels.empty())
           c.c_code = generate_c(c.program, c.schedule);  // its kernels' arguments
         if (c.target == Target::CUDA && c.cuda_schedule.kernels.empty() && !c.schedule.kernels.empty())
           c.cuda_schedule = schedule_cuda(c.program, c.schedule);
         plan_memory(c);
       }}},
  };
  return *passes;
}

std::string dump_of(const std::string& pass, const Compiled& c) {
  if (pass == "schedule_cuda") return c.cuda_schedule.text();
  if (pass == "generate_c") return c.c_code.source;
  if (pass == "generate_cuda") return c.cuda_code.source;
  if (pass == "find_generic_paths") return generic_paths_text(c.generic_paths);
  return memory_plan_text(c);
}

}  // namespace

std::string state_text(const Compiled& c) {
  std::string out = c.program_text();
  if (!c.schedule.steps.empty()) out += kScheduleLine + c.schedule_text();
  return out;
}

std::string run_passes(const std::string& text, const std::vector<std::string>& passes, const PipelineOptions& opts) {
  Compiled c = parse_state(text, opts);
  if (passes.empty()) return state_text(c);
  for (const auto& name : passes) {
    auto it = named_passes().find(name);
    if (it == named_passes().end()) throw std::invalid_argument("no pass named '" + name + "'");
    it->second.run(c, opts);
    if (opts.verify) verify_compiled(c, name);
  }
  const NamedPass& last = named_passes().at(passes.back());
  return last.out == Out::Dump ? dump_of(passes.back(), c) : state_text(c);
}

}  // namespace ember
