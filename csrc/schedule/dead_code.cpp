#include "schedule/dead_code.h"

#include <vector>

namespace ember {

void eliminate_dead_code(Program& p) {
  std::vector<int> producer(p.buffers.size(), -1);
  for (size_t i = 0; i < p.computed.size(); ++i) producer[p.computed[i].buffer] = static_cast<int>(i);
  std::vector<bool> live(p.buffers.size(), false);
  std::vector<int> work;
  auto mark = [&](int b) {
    if (b >= 0 && !live[b]) {
      live[b] = true;
      work.push_back(b);
    }
  };
  for (const auto& o : p.outputs)
    if (o.is_tensor) mark(o.view.buffer);
  for (const auto& e : p.externs)
    for (const auto& v : e.tensor_views) mark(v.buffer);
  while (!work.empty()) {
    int b = work.back();
    work.pop_back();
    if (producer[b] >= 0)
      for (int dep : loaded_buffers(p.computed[producer[b]])) mark(dep);
  }
  std::vector<Step> steps;
  for (const auto& s : p.steps)
    if (s.kind == Step::Kind::Extern || live[p.computed[s.index].buffer]) steps.push_back(s);
  p.steps = std::move(steps);
}

}  // namespace ember
