#include "schedule/exec_steps.h"

#include <algorithm>
#include <unordered_map>

namespace ember {

StepPlan group_steps(const Schedule& s, const std::vector<std::vector<int>>& kernel_args) {
  StepPlan plan;
  auto& steps = plan.steps;
  for (const auto& st : s.steps) {
    if (st.kind == Schedule::Step::Kind::Extern) {
      ExecStep e;
      e.kind = ExecStep::Kind::Extern;
      e.extern_call = st.index;
      steps.push_back(std::move(e));
      continue;
    }
    if (steps.empty() || steps.back().kind != ExecStep::Kind::Kernels) steps.push_back(ExecStep{});
    steps.back().kernels.push_back(st.index);
  }
  plan.arg_slots.resize(steps.size());
  for (size_t si = 0; si < steps.size(); ++si) {
    ExecStep& st = steps[si];
    std::unordered_map<int, int> slot;
    for (int k : st.kernels) {
      std::vector<int> slots;
      for (int b : kernel_args.at(k)) {
        auto it = slot.find(b);
        if (it == slot.end()) {
          it = slot.emplace(b, static_cast<int>(st.args.size())).first;
          st.args.push_back(b);
        }
        slots.push_back(it->second);
      }
      plan.arg_slots[si].push_back(std::move(slots));
    }
  }
  return plan;
}

std::vector<SizedLifetime> arena_lifetimes(const Program& p, const std::vector<ExecStep>& steps,
                                           const std::vector<bool>& buffer_in_memory) {
  std::vector<bool> is_output(p.buffers.size(), false);
  for (const auto& o : p.outputs)
    if (o.is_tensor) is_output[o.view.buffer] = true;
  std::vector<int> first(p.buffers.size(), -1), last(p.buffers.size(), -1);
  auto touch = [&](int b, int step) {
    if (first[b] < 0) first[b] = step;
    last[b] = step;
  };
  for (size_t si = 0; si < steps.size(); ++si) {
    const ExecStep& st = steps[si];
    if (st.kind == ExecStep::Kind::Kernels) {
      for (int b : st.args) touch(b, static_cast<int>(si));
    } else {
      for (const auto& v : p.externs[st.extern_call].tensor_views) touch(v.buffer, static_cast<int>(si));
    }
  }
  std::vector<SizedLifetime> out;
  for (const auto& b : p.buffers) {
    if (b.kind != Buffer::Kind::Computed || is_output[b.id] || first[b.id] < 0) continue;
    if (!buffer_in_memory.empty() && !buffer_in_memory[b.id]) continue;
    out.push_back({b.id, b.extent() * Dim(static_cast<int64_t>(dtype_size(b.dtype))), first[b.id], last[b.id]});
  }
  return out;
}

MemoryPlan place_arena(const std::vector<SizedLifetime>& lifetimes, int num_buffers,
                       const std::vector<int64_t>& symbols) {
  std::vector<Lifetime> candidates;
  // A size-oblivious symbol may be 0 at run time: an empty buffer takes no bytes.
  for (const auto& l : lifetimes)
    candidates.push_back({l.buffer, std::max<int64_t>(0, eval_dim(l.bytes, symbols)), l.first, l.last});
  return plan_arena(candidates, num_buffers);
}

}  // namespace ember
