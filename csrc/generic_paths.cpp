#include "generic_paths.h"

#include <map>
#include <set>
#include <sstream>

#include "pipeline.h"
#include "schedule/dead_code.h"
#include "schedule/fuse.h"
#include "schedule/merge_dims.h"
#include "schedule/split_reductions.h"

namespace ember {

namespace {

// The second twin's sizes: the hints plus this (a multiple of 16 keeps the alignments
// vector paths look for).
constexpr int64_t kOtherSizes = 16;

// A static twin up to the schedule (and the CUDA schedule), as run_pipeline makes it.
Compiled compile_static(const Compiled& c, const std::vector<int64_t>& values, const PipelineOptions& opts) {
  Compiled t;
  t.target = c.target;
  t.graph = specialize(c.graph, values);
  t.program = lower_graph(t.graph, lower_options(opts));
  if (opts.pad_matmuls) pad_matmuls(t.program, t.graph, opts.pad);
  eliminate_dead_code(t.program);
  t.schedule = fuse(t.program, fuse_options(opts));
  merge_inner_dims(t.schedule);
  if (c.target == Target::CPU) split_reductions(t.schedule);
  if (c.target == Target::CUDA) t.cuda_schedule = schedule_cuda(t.program, t.schedule);
  return t;
}

struct Place {
  int kernel = -1, stage = -1;
};

// Where each computed buffer is scheduled.
std::vector<Place> places(const Program& p, const Schedule& s) {
  std::vector<Place> out(p.computed.size());
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (size_t st = 0; st < s.kernels[k].stages.size(); ++st)
      for (const auto& item : s.kernels[k].stages[st].items)
        out[item.computed] = {static_cast<int>(k), static_cast<int>(st)};
  return out;
}

std::set<int> items_of(const Kernel& k) {
  std::set<int> out;
  for (const auto& st : k.stages)
    for (const auto& item : st.items) out.insert(item.computed);
  return out;
}

// The symbolic sizes among `dims`, as text ("s0*s1, s1").
std::string symbolic_text(const Dims& dims) {
  std::string out;
  for (const auto& d : dims)
    if (!d.is_static()) out += (out.empty() ? "" : ", ") + print_dim(d);
  return out.empty() ? "sizes" : out;
}

std::map<std::string, int> extern_counts(const Program& p) {
  std::map<std::string, int> out;
  for (const auto& e : p.externs) ++out[e.op];
  return out;
}

// What differs between the symbolic compile and one static twin, each difference under a
// key that names it without the twin's sizes (kernel, kind, buffer), in order.
class Comparison {
 public:
  Comparison(const Compiled& c, const Compiled& t) : c_(c), t_(t) {}

  std::vector<std::pair<std::string, GenericPath>> run() {
    graph_level();
    if (c_.program.computed.size() == t_.program.computed.size()) per_buffer();
    if (c_.target == Target::CUDA && !t_.cuda_schedule.kernels.empty()) per_cuda_kernel();
    return std::move(out_);
  }

 private:
  void add(int kernel, const std::string& kind, const std::string& what) {
    const std::string name = kernel < 0 ? "" : c_.schedule.kernels[kernel].name;
    const std::string key = name + "|" + kind;
    for (const auto& [k, g] : out_)
      if (k == key) return;
    out_.push_back({key, {name, what}});
  }

  void graph_level() {
    const auto sym = extern_counts(c_.program), stat = extern_counts(t_.program);
    for (const auto& [op, n] : sym) {
      const auto it = stat.find(op);
      if (it != stat.end() && it->second >= n) continue;
      std::string reason;
      for (const auto& e : c_.program.externs)
        if (e.op == op) reason = e.reason;
      add(-1, "extern " + op, op + " left to ATen (" + reason + ")");
    }
    if (c_.program.computed.size() != t_.program.computed.size())
      add(-1, "computed", "lowered to " + std::to_string(c_.program.computed.size()) + " computed buffers (static sizes: " +
                  std::to_string(t_.program.computed.size()) + ")");
    if (c_.schedule.kernels.size() != t_.schedule.kernels.size())
      add(-1, "kernels", std::to_string(c_.schedule.kernels.size()) + " kernels (static sizes: " +
                  std::to_string(t_.schedule.kernels.size()) + ")");
  }

  // Per computed buffer: its stage's form in both schedules.
  void per_buffer() {
    const auto sym = places(c_.program, c_.schedule), stat = places(t_.program, t_.schedule);
    for (size_t ci = 0; ci < sym.size(); ++ci) {
      const Place a = sym[ci], b = stat[ci];
      if (a.kernel < 0 || b.kernel < 0 || c_.program.computed[ci].origins != t_.program.computed[ci].origins) continue;
      const Kernel& ka = c_.schedule.kernels[a.kernel];
      const Kernel& kb = t_.schedule.kernels[b.kernel];
      const Stage& sa = ka.stages[a.stage];
      const Stage& sb = kb.stages[b.stage];
      const std::string buf = "buf" + std::to_string(c_.program.computed[ci].buffer);
      if (items_of(ka) != items_of(kb))
        add(a.kernel, "fused", "fused otherwise than with static sizes: " + std::to_string(items_of(ka).size()) +
                          " buffer(s) over " + print_dims(ka.outer) + " (static: " + std::to_string(items_of(kb).size()) +
                          "; a symbolic size that equals another only at the hints keeps them apart)");
      if (sb.vector_reduce && !sa.vector_reduce)
        add(a.kernel, "vector " + buf, buf + ": a row reduction where static sizes make a vector one (" +
                          symbolic_text(c_.program.computed[ci].sizes) + " symbolic)");
      if (sb.split > 1 && sa.split <= 1)
        add(a.kernel, "split " + buf, buf + ": its reduction not split over threads (" + symbolic_text(ka.outer) + " symbolic)");
      if (sa.vector_reduce == sb.vector_reduce && sa.inner.size() > sb.inner.size())
        add(a.kernel, "merge " + std::to_string(a.stage), "stage " + std::to_string(a.stage) + ": " + std::to_string(sa.inner.size()) +
                          " inner loops where static sizes merge them into " + std::to_string(sb.inner.size()) + " (" +
                          symbolic_text(sa.inner) + " symbolic)");
    }
  }

  // Per CUDA kernel whose buffers a static kernel holds too: its plans in both.
  void per_cuda_kernel() {
    std::map<std::set<int>, int> stat;
    for (size_t k = 0; k < t_.schedule.kernels.size(); ++k) stat[items_of(t_.schedule.kernels[k])] = static_cast<int>(k);
    for (size_t k = 0; k < c_.cuda_schedule.kernels.size(); ++k) {
      const auto it = stat.find(items_of(c_.schedule.kernels[k]));
      if (it == stat.end() || static_cast<size_t>(it->second) >= t_.cuda_schedule.kernels.size()) continue;
      const CudaKernelSchedule& a = c_.cuda_schedule.kernels[k];
      const CudaKernelSchedule& b = t_.cuda_schedule.kernels[it->second];
      const int ki = static_cast<int>(k);
      const std::string why = " (" + symbolic_text(c_.schedule.kernels[k].outer) + " symbolic)";
      if (b.launch.transpose && !a.launch.transpose) add(ki, "transpose", "strided accesses where static sizes tile a transpose" + why);
      if (b.vector.lanes > 0 && a.vector.lanes == 0)
        add(ki, "vector", "scalar accesses where static sizes take " + std::to_string(b.vector.lanes) + "-element words" + why);
      const bool rows = b.info.shape == CudaKernelInfo::Shape::RowWarp || b.info.shape == CudaKernelInfo::Shape::RowBlock;
      if (rows && b.row_tile.lanes > 0 && a.row_tile.lanes == 0) add(ki, "row tile", "a loop per element where static sizes tile rows" + why);
      if (b.info.hoisted_values > 0 && a.info.hoisted_values == 0)
        add(ki, "hoist", "no values hoisted out of the grid loop (static sizes: " + std::to_string(b.info.hoisted_values) + ")" + why);
      if (b.column_split.chunks > 0 && a.column_split.chunks == 0)
        add(ki, "column split", "one block per row where static sizes split columns over " + std::to_string(b.column_split.chunks) +
                    " chunks" + why);
    }
  }

  const Compiled& c_;
  const Compiled& t_;
  std::vector<std::pair<std::string, GenericPath>> out_;
};

}  // namespace

std::vector<GenericPath> find_generic_paths(const Compiled& c, const PipelineOptions& opts) {
  if (c.graph.symbols.empty()) return {};
  std::vector<GenericPath> out;
  try {
    // Two static twins, at the hints and at other sizes: a static size that equals a
    // hint by chance (a sequence of 32 beside a head dim of 32) lets the first fuse what
    // no other static size would. What differs from both is the symbols' doing.
    std::vector<int64_t> hints = c.graph.hints(), other = hints;
    for (auto& v : other) v += v >= 2 ? kOtherSizes : 0;  // 0, 1 and negatives are not sizes
    const auto first = Comparison(c, compile_static(c, hints, opts)).run();
    const auto second = Comparison(c, compile_static(c, other, opts)).run();
    for (const auto& [key, path] : first)
      for (const auto& [k, p] : second)
        if (k == key) {
          out.push_back(path);
          break;
        }
  } catch (const std::exception& e) {
    out.push_back({"", std::string("no comparison with static sizes: their compile failed (") + e.what() + ")"});
  }
  for (size_t k = 0; k < c.c_code.kernels.size(); ++k)
    for (const auto& g : c.c_code.kernels[k].generic) out.push_back({c.schedule.kernels[k].name, g});
  return out;
}

std::string generic_paths_text(const std::vector<GenericPath>& paths) {
  std::ostringstream os;
  for (const auto& g : paths) os << (g.kernel.empty() ? "graph" : g.kernel) << ": " << g.what << "\n";
  return os.str();
}

}  // namespace ember
