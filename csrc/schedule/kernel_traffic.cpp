#include "schedule/kernel_traffic.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace ember {

namespace {

// Elements of storage a layout spans at these symbol values (0 for an empty tensor).
int64_t extent_at(const Buffer& b, const std::vector<int64_t>& s) {
  const auto sizes = eval_dims(b.sizes, s);
  const auto strides = eval_dims(b.strides, s);
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    last += (sizes[d] - 1) * std::abs(d < strides.size() ? strides[d] : 1);
  }
  return last + 1;
}

// Distinct values the loop vars of `index` take, at most `cap` (a var that is no loop
// var of the kernel counts as `cap`: nothing bounds it here).
int64_t index_values(const Expr& index, const std::function<int64_t(int)>& trips, int64_t cap) {
  std::unordered_set<int64_t> vars;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (e->op == ExprOp::Var) vars.insert(e->ival);
    for (const auto& a : e->args) walk(a);
  };
  walk(index);
  int64_t n = 1;
  for (int64_t v : vars) {
    const int64_t t = trips(static_cast<int>(v));
    if (t < 0) return cap;
    if (t == 0) return 0;
    if (n > cap / t) return cap;
    n *= t;
  }
  return std::min(n, cap);
}

const char* kind_of(const Kernel& k) {
  bool reduction = false;
  for (const auto& st : k.stages)
    for (const auto& it : st.items) {
      if (it.is_scan) return "scan";
      reduction = reduction || it.is_reduction;
    }
  return reduction ? "reduction" : "pointwise";
}

}  // namespace

std::vector<KernelTraffic> kernel_traffic(const Program& p, const Schedule& s, const std::vector<bool>& in_memory,
                                          const std::vector<int64_t>& symbols) {
  auto stored = [&](int b) { return b >= 0 && (in_memory.empty() || (b < static_cast<int>(in_memory.size()) && in_memory[b])); };
  std::vector<KernelTraffic> out;
  for (const Kernel& k : s.kernels) {
    KernelTraffic t;
    t.name = k.name;
    t.kind = kind_of(k);
    std::unordered_set<int> computed_here;
    for (const auto& st : k.stages)
      for (const auto& it : st.items) computed_here.insert(p.computed[it.computed].buffer);

    // Distinct loads per buffer: (buffer, index) -> the most distinct elements any stage
    // reading it that way touches.
    std::map<int, std::unordered_map<Expr, int64_t, ExprHash, ExprEqual>> loads;
    std::map<int, int64_t> writes;
    for (const auto& st : k.stages) {
      auto trips = [&](int v) -> int64_t {
        if (v >= kInnerVarBase && v - kInnerVarBase < static_cast<int>(st.inner.size()))
          return eval_dim(st.inner[v - kInnerVarBase], symbols);
        if (v >= kOuterVarBase && v < kInnerVarBase && v - kOuterVarBase < static_cast<int>(k.outer.size()))
          return eval_dim(k.outer[v - kOuterVarBase], symbols);
        return -1;
      };
      for (const auto& it : st.items) {
        const int b = p.computed[it.computed].buffer;
        // A scatter-add writes its whole buffer (the zeroing launch), then adds into it.
        if (stored(b))
          writes[b] = it.scatter_add ? extent_at(p.buffers[b], symbols) : numel(eval_dims(p.computed[it.computed].sizes, symbols));
        auto read = [&](const Expr& ld) {
          const int src = static_cast<int>(ld->ival);
          if (computed_here.count(src) || !stored(src) || src >= static_cast<int>(p.buffers.size())) return;
          const int64_t cap = extent_at(p.buffers[src], symbols);
          int64_t& n = loads[src][ld->args.at(0)];
          n = std::max(n, index_values(ld->args.at(0), trips, cap));
        };
        walk_loads(it.value, read);
        if (it.scatter_add) walk_loads(it.store_index, read);
      }
    }
    for (const auto& [b, by_index] : loads) {
      int64_t n = 0;
      const int64_t cap = extent_at(p.buffers[b], symbols);
      for (const auto& [index, count] : by_index) n = std::min(cap, n + count);
      const int64_t bytes = n * dtype_size(p.buffers[b].dtype);
      t.reads.push_back({b, bytes});
      t.read_bytes += bytes;
    }
    for (const auto& [b, n] : writes) {
      const int64_t bytes = n * dtype_size(p.buffers[b].dtype);
      t.writes.push_back({b, bytes});
      t.write_bytes += bytes;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ember
