#include "schedule/placement.h"

#include <functional>

namespace ember {

bool read_is_local(const Producer& prod, const Schedule& s, int kernel, int stage, VectorResults vector) {
  if (prod.kernel != kernel) return false;
  const Stage& ps = s.kernels[kernel].stages[prod.stage];
  const KernelItem& item = ps.items[prod.item];
  if (ps.vector_reduce && vector == VectorResults::InMemory) return false;
  if (item.is_scan) return prod.stage == stage;
  if (item.is_reduction || ps.inner.empty()) return prod.stage < stage || (prod.stage == stage && !item.is_reduction);
  return prod.stage == stage;
}

Placement place_buffers(const Program& p, const Schedule& s, VectorResults vector) {
  Placement m;
  m.in_memory.assign(p.buffers.size(), false);
  m.producer.assign(p.buffers.size(), Producer{});
  for (const auto& b : p.buffers)
    if (b.kind != Buffer::Kind::Computed) m.in_memory[b.id] = true;
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (size_t st = 0; st < s.kernels[k].stages.size(); ++st)
      for (size_t i = 0; i < s.kernels[k].stages[st].items.size(); ++i)
        m.producer[p.computed[s.kernels[k].stages[st].items[i].computed].buffer] =
            Producer{static_cast<int>(k), static_cast<int>(st), static_cast<int>(i)};
  for (const auto& o : p.outputs)
    if (o.is_tensor) m.in_memory[o.view.buffer] = true;
  for (const auto& e : p.externs)
    for (const auto& v : e.tensor_views) m.in_memory[v.buffer] = true;
  std::vector<bool> needed_elsewhere = m.in_memory;  // inputs, outputs, extern operands
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (size_t st = 0; st < s.kernels[k].stages.size(); ++st)
      for (const auto& item : s.kernels[k].stages[st].items) {
        std::function<void(const Expr&)> walk = [&](const Expr& e) {
          if (e->op == ExprOp::Load &&
              !read_is_local(m.producer[e->ival], s, static_cast<int>(k), static_cast<int>(st), vector)) {
            m.in_memory[e->ival] = true;
            if (m.producer[e->ival].kernel != static_cast<int>(k)) needed_elsewhere[e->ival] = true;
          }
          for (const auto& a : e->args) walk(a);
        };
        walk(item.value);
        // A scatter-add's target is in memory, and so are the indices its offset loads.
        if (item.scatter_add) {
          m.in_memory[p.computed[item.computed].buffer] = true;
          walk(item.store_index);
        }
      }
  m.own_reads_only.assign(p.buffers.size(), -1);
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (m.in_memory[b] && !needed_elsewhere[b]) m.own_reads_only[b] = m.producer[b].kernel;
  return m;
}

}  // namespace ember
