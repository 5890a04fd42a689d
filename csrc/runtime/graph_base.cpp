#include "runtime/graph_base.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "runtime/disk_cache.h"

namespace ember {

namespace {

struct AtomicCounts {
  std::atomic<int64_t> graphs{0}, codegen_runs{0}, compiler_runs{0}, memory_cache_hits{0}, disk_cache_hits{0};
};

AtomicCounts& counts(Target target) {
  static AtomicCounts cpu, cuda;
  return target == Target::CPU ? cpu : cuda;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("EMBER_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ember";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/ember";
}

std::unique_ptr<DiskCache> open_disk_cache(const GraphOptions& opts, std::string* note) {
  if (!opts.disk_cache) return nullptr;
  auto disk = std::make_unique<DiskCache>(opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir);
  if (disk->usable()) return disk;
  if (note) *note = disk->reason();
  return nullptr;
}

MemoryPlan CompiledGraphBase::arena_at(const std::vector<int64_t>& symbols) const {
  return place_arena(c_.lifetimes, static_cast<int>(c_.program.buffers.size()), symbols);
}

void CompiledGraphBase::run_pipeline_for(Target target, const std::string& graph_text, const GraphOptions& opts) {
  count(target, CompileEvent::Graph);
  PipelineOptions po = opts.pipeline;
  po.target = target;
  po.dump = !opts.debug_dir.empty();
  c_ = run_pipeline(graph_text, po);
  count(target, CompileEvent::Codegen);
  if (po.dump) write_pass_dumps(c_.passes, opts.debug_dir);
}

const ExecStep& CompiledGraphBase::kernel_step(int step, size_t pointers, size_t symbols) const {
  const ExecStep& st = c_.steps.steps.at(step);
  if (st.kind != ExecStep::Kind::Kernels) throw std::invalid_argument("step is not a kernel group");
  if (pointers != st.args.size()) throw std::invalid_argument("wrong number of buffer pointers");
  if (symbols != c_.graph.symbols.size()) throw std::invalid_argument("wrong number of symbol values");
  return st;
}

CompileCounts compile_counts(Target target) {
  const AtomicCounts& c = counts(target);
  return {c.graphs.load(), c.codegen_runs.load(), c.compiler_runs.load(), c.memory_cache_hits.load(),
          c.disk_cache_hits.load()};
}

void reset_compile_counts(Target target) {
  AtomicCounts& c = counts(target);
  c.graphs = 0;
  c.codegen_runs = 0;
  c.compiler_runs = 0;
  c.memory_cache_hits = 0;
  c.disk_cache_hits = 0;
}

void count(Target target, CompileEvent event) {
  AtomicCounts& c = counts(target);
  switch (event) {
    case CompileEvent::Graph: ++c.graphs; break;
    case CompileEvent::Codegen: ++c.codegen_runs; break;
    case CompileEvent::CompilerRun: ++c.compiler_runs; break;
    case CompileEvent::MemoryHit: ++c.memory_cache_hits; break;
    case CompileEvent::DiskHit: ++c.disk_cache_hits; break;
  }
}

}  // namespace ember
