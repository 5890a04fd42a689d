#include "schedule/exec_steps.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace ember {

namespace {

// Whether ATen's `op` (aten.view.default) may return a view of its tensor arguments
// (ATen's view ops, and the ops that return their input or a view when they can): its
// result then lives in an argument's memory, which must stay put while the result is
// used. A graph with symbols runs such ops in ATen when lowering cannot prove the layout.
bool extern_may_alias(const std::string& op) {
  static const std::unordered_set<std::string> kViews = {
      "alias", "as_strided", "chunk", "detach", "diagonal", "expand", "expand_as", "flatten", "imag",
      "lift_fresh", "movedim", "moveaxis", "narrow", "permute", "real", "reshape", "_reshape_alias", "select",
      "slice", "split", "split_with_sizes", "squeeze", "swapaxes", "swapdims", "t", "tensor_split", "transpose",
      "unbind", "unflatten", "unfold", "unsqueeze", "view", "view_as", "view_as_complex", "view_as_real",
      "_unsafe_view", "contiguous", "_conj", "_neg_view", "hsplit", "vsplit", "dsplit", "numpy_T", "mT", "mH",
      "adjoint", "indices", "values", "crow_indices", "col_indices", "ccol_indices", "row_indices"};
  size_t begin = op.find('.');
  if (begin == std::string::npos) return false;
  size_t end = op.find('.', begin + 1);
  return kViews.count(op.substr(begin + 1, end == std::string::npos ? std::string::npos : end - begin - 1)) > 0;
}

}  // namespace

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
  // Per buffer, the buffers whose memory it may be a view of (an ATen view op's result
  // and its arguments, transitively): a use of the view is a use of them.
  std::vector<std::vector<int>> aliases(p.buffers.size());
  auto touch = [&](int b, int step) {
    for (int m : aliases[b]) {
      if (first[m] < 0) first[m] = step;
      last[m] = step;
    }
    if (first[b] < 0) first[b] = step;
    last[b] = step;
  };
  for (size_t si = 0; si < steps.size(); ++si) {
    const ExecStep& st = steps[si];
    if (st.kind == ExecStep::Kind::Kernels) {
      for (int b : st.args) touch(b, static_cast<int>(si));
    } else {
      const ExternCall& call = p.externs[st.extern_call];
      for (const auto& v : call.tensor_views) touch(v.buffer, static_cast<int>(si));
      if (!extern_may_alias(call.op)) continue;
      for (int o : call.output_buffers) {
        if (o < 0) continue;
        for (const auto& v : call.tensor_views) {
          aliases[o].push_back(v.buffer);
          aliases[o].insert(aliases[o].end(), aliases[v.buffer].begin(), aliases[v.buffer].end());
        }
      }
    }
  }
  // A graph output that is a view of an intermediate keeps that intermediate out of the
  // arena, which the next call reuses.
  for (const auto& o : p.outputs)
    if (o.is_tensor)
      for (int m : aliases[o.view.buffer]) is_output[m] = true;
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
