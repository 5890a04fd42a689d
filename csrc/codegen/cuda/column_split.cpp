#include "codegen/cuda/column_split.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "codegen/cuda/reduction.h"

namespace ember {

namespace {

// Column i0 of chunk `chunk` of row x's partials of item `computed`, as an lvalue of type
// `type`: partials are laid out [row][chunk][column].
std::string partial_ref(const CudaPrinter& pr, const ColumnSplit& split, int computed, const std::string& type,
                        int64_t width, const std::string& chunk) {
  return "((" + type + "*)(" + pr.scratch_name + " + " + std::to_string(split.partial_offset.at(computed)) +
         "))[((int64_t)x * " + std::to_string(split.chunks) + " + " + chunk + ") * " + std::to_string(width) + " + i0]";
}

// A vector stage's reduced rows r in [lo, hi) (C expressions), flattened over
// inner[1..] (`reduced`), accumulated into `accs` for the current kept lane i0.
void reduce_rows(CudaPrinter& pr, const Stage& stage, const Dims& reduced, std::vector<Acc>& accs,
                 const std::string& lo, const std::string& hi) {
  CEmitter& em = *pr.em;
  std::vector<std::pair<int, std::string>> vars;
  for (size_t d = 1; d < stage.inner.size(); ++d) vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
  em.open_scope(vars);
  for (const auto& l : pr.decompose_dims("r", reduced, "i", 1)) em.line(l);
  for (size_t i = 0; i < stage.items.size(); ++i)
    accumulate(em, pr.p.computed[stage.items[i].computed], accs[i], em.emit(stage.items[i].value));
  std::vector<std::string> body = em.close_scope();
  em.line("#pragma unroll 4");  // independent loads in flight (the sums wait, the loads need not)
  em.line("for (" + pr.index_type() + " r = " + lo + "; r < " + hi + "; ++r) {");
  for (const auto& l : body) em.line("  " + l);
  em.line("}");
}

}  // namespace

std::string partial_kernel(CudaPrinter& pr, const ColumnSplit& split, const CudaKernelInfo& info) {
  std::string head = pr.signature(pr.k.name + "_partial", info.partial_block, info.args);
  CEmitter& em = *pr.em;
  const std::string I = pr.index_type();
  const std::string lanes = std::to_string(split.group_lanes);
  em.open_scope(pr.outer_vars());
  // Block b takes row b / blocks_per_row and, side by side, `groups` chunks of it: a
  // group's threads walk the columns together (coalesced), each its own columns' rows.
  em.line("const int tid = threadIdx.x;");
  em.line("const " + I + " x = (" + I + ")(blockIdx.x / " + std::to_string(split.blocks_per_row) + "u);");
  em.line("const int64_t s = (int64_t)(blockIdx.x % " + std::to_string(split.blocks_per_row) + "u) * " +
          std::to_string(split.groups) + " + tid / " + lanes + ";");
  em.line("const int lane = tid % " + lanes + ";");
  for (const auto& l : pr.decompose_dims("x", pr.k.outer, "o")) em.line(l);
  for (const auto& stage : pr.k.stages) {
    if (!stage.vector_reduce) continue;
    std::vector<int64_t> reduced = hints(stage.inner);
    reduced.erase(reduced.begin());
    const int64_t rows = numel(reduced), width = stage.inner[0].hint();
    const int64_t span = (rows + split.chunks - 1) / split.chunks;
    em.open_scope({{inner_var(0), "i0"}});
    em.line("const int64_t i0 = (int64_t)(k);");
    std::vector<Acc> accs(stage.items.size());
    for (size_t i = 0; i < stage.items.size(); ++i) accs[i] = declare_thread_acc(em, pr.p.computed[stage.items[i].computed], rows);
    const std::string lo = "s * " + std::to_string(span), n = std::to_string(rows);
    em.line("const int64_t hi = " + lo + " + " + std::to_string(span) + " < " + n + " ? " + lo + " + " +
            std::to_string(span) + " : " + n + ";");
    reduce_rows(pr, stage, to_dims(reduced), accs, lo, "hi");
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const Acc& a = accs[i];
      std::string v = a.flag.empty() ? a.acc : "(" + a.flag + " ? (" + a.type + ")NAN : " + a.acc + ")";
      em.line(partial_ref(pr, split, stage.items[i].computed, a.type, width, "s") + " = " + v + ";");
    }
    std::vector<std::string> body = em.close_scope();
    em.line("for (" + I + " k = lane; k < " + std::to_string(width) + "; k += " + lanes + ") {");
    for (const auto& l : body) em.line("  " + l);
    em.line("}");
  }
  std::vector<std::string> body = em.close_scope();
  return pr.function(head, body);
}

bool print_vector_stage(CudaPrinter& pr, const ColumnSplit& split, const Stage& stage) {
  CEmitter& em = *pr.em;
  const std::string I = pr.index_type();
  em.open_scope({{inner_var(0), "i0"}});
  em.line("const int64_t i0 = (int64_t)(k);");
  std::vector<Acc> accs(stage.items.size());
  // The kept dim (inner[0]) is static (fuse.cpp); the reduced rows may be symbolic, and
  // then of any count: their float sums take the long-chain type.
  const Dims reduced(stage.inner.begin() + 1, stage.inner.end());
  const int64_t chain = is_symbolic(reduced) ? std::numeric_limits<int64_t>::max() : numel(reduced);
  for (size_t i = 0; i < stage.items.size(); ++i) accs[i] = declare_thread_acc(em, pr.p.computed[stage.items[i].computed], chain);
  if (split.chunks > 0) {
    // A column split: the partial launch reduced the rows; combine its chunks in order.
    em.line("#pragma unroll 8");  // the partials' loads in flight together
    em.line("for (int s = 0; s < " + std::to_string(split.chunks) + "; ++s) {");
    for (size_t i = 0; i < stage.items.size(); ++i) {
      em.open_scope({});
      accumulate(em, pr.p.computed[stage.items[i].computed], accs[i],
                 partial_ref(pr, split, stage.items[i].computed, accs[i].type, stage.inner[0].hint(), "s"));
      for (const auto& l : em.close_scope()) em.line("  " + l);
    }
    em.line("}");
  } else {
    reduce_rows(pr, stage, reduced, accs, "0", pr.size_text(product(reduced)));
  }
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const ComputedBuffer& c = pr.p.computed[stage.items[i].computed];
    const Buffer& buf = pr.p.buffers[c.buffer];
    std::string result = finish_acc(em, c, accs[i], buf.dtype);
    em.line(CEmitter::store_text(em.buffer_name(c.buffer), em.emit(stage.items[i].store_index), buf.dtype, result));
  }
  std::vector<std::string> lanes = em.close_scope();
  em.line("for (" + I + " k = tid; k < " + std::to_string(stage.inner[0].hint()) + "; k += " + std::to_string(pr.launch.threads) + ") {");
  for (const auto& l : lanes) em.line("  " + l);
  em.line("}");
  return true;
}

}  // namespace ember
