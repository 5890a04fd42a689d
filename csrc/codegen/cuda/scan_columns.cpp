#include "codegen/cuda/scan_columns.h"

#include "codegen/cuda/reduction.h"
#include "codegen/stage_items.h"

namespace ember {

namespace {

std::string carry_name(int item) { return "carry" + std::to_string(item); }

// One segment's loop: `items` over j in [j_lo, j_hi) of the stage's one inner dim.
// Returns whether it stored anything.
bool segment_loop(CudaPrinter& pr, const StageItems& items) {
  CEmitter& em = *pr.em;
  const Stage& stage = pr.k.stages[0];
  em.open_scope(pr.inner_vars(stage));
  for (const auto& l : pr.decompose_dims("j", stage.inner, "i")) em.line(l);
  const bool stored = print_stage_items(em, items);
  std::vector<std::string> body = em.close_scope();
  // The steps' loads do not depend on the running values: unrolled, several are in flight.
  em.line("#pragma unroll 4");
  em.line("for (" + pr.index_type() + " j = j_lo; j < j_hi; ++j) {");
  for (const auto& l : body) em.line("  " + l);
  em.line("}");
  return stored;
}

}  // namespace

std::vector<std::string> scan_columns_body(CudaPrinter& pr, const ScanColumns& plan) {
  const Program& p = pr.p;
  CEmitter& em = *pr.em;
  const Stage& stage = pr.k.stages[0];
  const std::string I = pr.index_type();
  const std::string C = std::to_string(plan.columns);
  const std::string L = std::to_string(plan.length);
  const std::string rows = std::to_string(pr.launch.rows);
  std::vector<std::string> out;
  if (plan.segments > 1)
    for (int q : plan.carried) {
      const ComputedBuffer& c = p.computed[stage.items[q].computed];
      out.push_back("__shared__ " + acc_type(c, 0) + " " + carry_name(q) + "[" + std::to_string(plan.segments * plan.columns) +
                    "];  /* the segments' totals, [segment][column] */");
    }
  out.push_back("const int lane = threadIdx.x % " + C + ", seg = threadIdx.x / " + C + ";");
  out.push_back("const " + I + " row = (" + I + ")blockIdx.x * " + C + " + lane;");
  // A lane past the last row takes the last row's coordinates (what is hoisted out of the
  // loops reads in bounds) and an empty segment; it still meets the barrier.
  out.push_back("const " + I + " x = row < " + rows + " ? row : " + rows + " - 1;");
  out.push_back("const " + I + " j_lo = (" + I + ")seg * " + L + ";");
  out.push_back("const " + I + " j_hi = row >= " + rows + " ? j_lo : (j_lo + " + L + " < " + std::to_string(plan.extent) +
                " ? j_lo + " + L + " : " + std::to_string(plan.extent) + ");");
  em.open_scope(pr.outer_vars());
  for (const auto& l : pr.decompose_dims("x", pr.k.outer, "o")) em.line(l);
  pr.pin_own_loads();
  auto arg_index = [] { return std::string("(int64_t)j"); };
  std::vector<Acc> accs(stage.items.size());
  if (plan.segments > 1) {
    // Pass 1: the segment's totals. Nothing is stored; the items after the last scan are
    // not needed.
    std::vector<Acc> totals(stage.items.size());
    for (int q : plan.carried) totals[q] = declare_thread_acc(em, p.computed[stage.items[q].computed], 0);
    const std::vector<bool> nowhere(pr.m.in_memory.size(), false);
    const KernelItem* last = &stage.items[plan.carried.back()];
    segment_loop(pr, StageItems{p, stage, nowhere, totals, arg_index, "",
                                [last](const KernelItem& item) { return &item > last; }});
    for (int q : plan.carried) em.line(carry_name(q) + "[threadIdx.x] = " + totals[q].acc + ";");
    em.line("__syncthreads();");
  }
  // Pass 2: each scan from the totals of the segments before this one, in segment order.
  for (int q : plan.carried) {
    const ComputedBuffer& c = p.computed[stage.items[q].computed];
    accs[q] = declare_thread_acc(em, c, 0);
    if (plan.segments > 1)
      em.line("for (int s = 0; s < seg; ++s) " + scan_step_text(c.reduce_op, accs[q], carry_name(q) + "[s * " + C + " + lane]"));
  }
  segment_loop(pr, StageItems{p, stage, pr.m.in_memory, accs, arg_index, ""});
  for (const auto& l : em.close_scope()) out.push_back(l);
  return out;
}

}  // namespace ember
