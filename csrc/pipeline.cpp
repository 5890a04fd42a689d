#include "pipeline.h"

#include <fstream>
#include <sstream>

#include "lower/lowering.h"
#include "lower/order_reduced_dims.h"
#include "lower/split_long_reductions.h"
#include "lower/verify_program.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"
#include "schedule/merge_outer_dims.h"
#include "schedule/name_kernels.h"
#include "schedule/split_reductions.h"
#include "schedule/verify_schedule.h"

namespace ember {

namespace {

// Runs one pass, adds its seconds to a phase, checks the IR after it (opts.verify) and
// keeps it when dumping.
class PassRunner {
 public:
  PassRunner(const PipelineOptions& opts, Compiled& c) : opts_(opts), c_(c) {}

  template <class Pass, class Text>
  void operator()(const char* name, double& phase, Pass&& pass, Text&& text) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    phase += seconds_since(t0);
    if (opts_.verify) verify_compiled(c_, name);
    if (opts_.dump) c_.passes.push_back({name, text()});
  }

 private:
  const PipelineOptions& opts_;
  Compiled& c_;
};

}  // namespace

LowerOptions lower_options(const PipelineOptions& opts) {
  LowerOptions lo;
  lo.emulate_precision_casts = opts.emulate_precision_casts;
  lo.channels_last_activations = opts.target == Target::CUDA || opts.channels_last_activations;
  lo.channels_last_needs_many_convolutions = opts.target == Target::CUDA;
  // CUDA's tiled transposes read and write layout copies coalesced (codegen/cuda/transpose.h).
  lo.loads_lead_layout_copies = opts.target == Target::CPU;
  // Only the CPU runner prepares weights (python/ember/runtime/runner.py).
  lo.prepared_weights = opts.target == Target::CPU && opts.prepared_weights;
  // cuDNN's convolutions add their bias in an elementwise kernel of their own; oneDNN's
  // inside the convolution.
  lo.convolution_bias_in_kernels = opts.target == Target::CUDA;
  lo.aten_cuda = opts.target == Target::CUDA;
  // The zeroing launch before a scatter-add is the CUDA runner's (schedule_cuda).
  lo.atomic_scatter_add = opts.target == Target::CUDA && !opts.deterministic;
  return lo;
}

FuseOptions fuse_options(const PipelineOptions& opts) {
  return opts.target == Target::CUDA ? FuseOptions::cuda(opts.fuse) : FuseOptions{opts.fuse};
}

void plan_memory(Compiled& c) {
  std::vector<std::vector<int>> kernel_args;
  for (const auto& k : c.c_code.kernels) kernel_args.push_back(k.args);
  for (const auto& k : c.cuda_schedule.kernels) kernel_args.push_back(k.info.args);
  c.steps = group_steps(c.schedule, kernel_args);
  c.lifetimes = arena_lifetimes(c.program, c.steps.steps, c.buffer_in_memory());
  c.arena = place_arena(c.lifetimes, static_cast<int>(c.program.buffers.size()), c.program.symbol_hints);
}

void verify_compiled(const Compiled& c, const std::string& after_pass) {
  verify_program(c.program, after_pass);
  if (!c.schedule.steps.empty()) verify_schedule(c.schedule, c.program, after_pass);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const std::vector<bool>& Compiled::buffer_in_memory() const {
  return target == Target::CPU ? c_code.buffer_in_memory : cuda_schedule.placement.in_memory;
}

Compiled run_pipeline(const std::string& graph_text, const PipelineOptions& opts) {
  const bool cpu = opts.target == Target::CPU, cuda = opts.target == Target::CUDA;
  Compiled c;
  c.target = opts.target;
  PhaseTimes& t = c.times;
  PassRunner pass(opts, c);
  auto graph = [&] { return print_graph(c.graph); };
  auto program = [&] { return c.program_text(); };
  auto schedule = [&] { return c.schedule_text(); };

  pass("parse_graph", t.parse, [&] { c.graph = parse_graph(graph_text); }, graph);
  pass("lower_graph", t.lower, [&] { c.program = lower_graph(c.graph, lower_options(opts)); }, program);
  if (opts.pad_matmuls) pass("pad_matmuls", t.lower, [&] { pad_matmuls(c.program, c.graph, opts.pad); }, program);
  pass("eliminate_dead_code", t.lower, [&] { eliminate_dead_code(c.program); }, program);
  if (cuda) pass("order_reduced_dims", t.lower, [&] { order_reduced_dims(c.program); }, program);
  if (cuda) pass("split_long_reductions", t.lower, [&] { split_long_reductions(c.program); }, program);
  pass("fuse", t.schedule, [&] { c.schedule = fuse(c.program, fuse_options(opts)); }, schedule);
  pass("merge_inner_dims", t.schedule, [&] { merge_inner_dims(c.schedule); }, schedule);
  if (cuda && !c.graph.symbols.empty())
    pass("merge_symbolic_outer_dims", t.schedule, [&] { merge_symbolic_outer_dims(c.schedule); }, schedule);
  if (cpu) pass("split_reductions", t.schedule, [&] { split_reductions(c.schedule); }, schedule);
  if (cuda)
    pass("schedule_cuda", t.schedule, [&] { c.cuda_schedule = schedule_cuda(c.program, c.schedule); },
         [&] { return c.cuda_schedule.text(); });
  pass("name_kernels", t.schedule, [&] {
    name_kernels(c.schedule, c.program, c.graph, cuda ? &c.cuda_schedule : nullptr, opts.descriptive_names);
  }, schedule);
  if (cpu) pass("generate_c", t.codegen, [&] { c.c_code = generate_c(c.program, c.schedule); }, [&] { return c.c_code.source; });
  if (cuda)
    pass("generate_cuda", t.codegen, [&] { c.cuda_code = generate_cuda(c.program, c.schedule, c.cuda_schedule); },
         [&] { return c.cuda_code.source; });
  if (!c.graph.symbols.empty())
    pass("find_generic_paths", t.schedule, [&] { c.generic_paths = find_generic_paths(c, opts); },
         [&] { return generic_paths_text(c.generic_paths); });
  pass("plan_arena", t.schedule, [&] { plan_memory(c); }, [&] { return memory_plan_text(c); });
  return c;
}

std::string memory_plan_text(const Compiled& c) {
  std::ostringstream out;
  out << "arena " << c.arena.arena_bytes << " bytes\n";
  for (size_t b = 0; b < c.arena.offset.size(); ++b)
    if (c.arena.offset[b] >= 0) out << "  buf" << b << " at " << c.arena.offset[b] << "\n";
  for (const auto& ks : c.cuda_schedule.kernels) {
    const CudaKernelInfo& k = ks.info;
    out << k.name << ": " << cuda_shape_name(k.shape) << " grid " << k.grid << " block " << k.block;
    if (k.partial_grid > 0) out << " (column split: partials on grid " << k.partial_grid << " block " << k.partial_block << ")";
    if (k.row_lanes > 0) {
      out << " (row tile: chunks of " << k.row_lanes << ", ";
      if (k.row_slots > 0) out << k.row_slots << " a thread in registers";
      else out << "looped";
      for (size_t i = 0; i < k.row_cached.size(); ++i) out << (i ? ", buf" : "; read once: buf") << k.row_cached[i];
      for (size_t i = 0; i < k.row_unstored.size(); ++i)
        out << (i ? ", buf" : "; in registers only: buf") << k.row_unstored[i];
      out << ")";
    }
    if (k.hoisted_values > 0)
      out << " (hoisted before the grid loop: " << k.hoisted_values << " per-lane values, " << k.hoisted_words << " words)";
    out << "\n";
  }
  return out.str();
}

void write_pass_dumps(const std::vector<PassDump>& passes, const std::string& dir) {
  for (size_t i = 0; i < passes.size(); ++i) {
    const PassDump& p = passes[i];
    const char* ext = p.pass == "generate_c" ? ".c" : p.pass == "generate_cuda" ? ".cu" : ".txt";
    std::ofstream(dir + "/" + std::to_string(i) + "_" + p.pass + ext, std::ios::binary) << p.text;
  }
}

}  // namespace ember
