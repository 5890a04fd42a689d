#include "codegen/cuda/row.h"

#include "codegen/stage_items.h"

#include <algorithm>
#include <limits>
#include <set>

namespace ember {

namespace {

// Whether a later stage reads from memory a value stage `st` stores (in the row tile,
// where a kept value is a register).
bool read_later_from_memory(const CudaPrinter& pr, const RowTile& tile, int st) {
  bool read = false;
  for (size_t later = st + 1; later < pr.k.stages.size(); ++later)
    for (const auto& item : pr.k.stages[later].items)
      walk_loads(item.value, [&](const Expr& e) {
        const Producer& prod = pr.m.producer[e->ival];
        read |= prod.kernel == pr.ki && prod.stage == st && !tile.kept.count(static_cast<int>(e->ival)) &&
                !read_is_local(prod, pr.s, pr.ki, static_cast<int>(later), VectorResults::InMemory);
      });
  return read;
}

// Stage `st` through the per-element loop. Returns whether the stage stored anything
// to memory.
bool print_row_stage(CudaPrinter& pr, const ColumnSplit& split, int st) {
  const Program& p = pr.p;
  CEmitter& em = *pr.em;
  const Stage& stage = pr.k.stages[st];
  if (stage.vector_reduce) return print_vector_stage(pr, split, stage);
  const int threads = pr.launch.threads;
  const int row_level = em.depth();
  bool reductions = false, stored = false;
  bool scan = false;
  for (const auto& item : stage.items) {
    reductions |= p.computed[item.computed].is_reduction;
    scan |= item.is_scan;
  }
  std::vector<Acc> accs(stage.items.size());
  // Elements each thread accumulates (all of them on thread 0 for a scan stage); a
  // symbolic row may be of any length, so its float sums take the long-chain type.
  const int64_t chain = is_symbolic(stage.inner) ? std::numeric_limits<int64_t>::max()
                        : scan                   ? numel(stage.inner)
                                                 : (numel(stage.inner) + threads - 1) / threads;
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const ComputedBuffer& c = p.computed[stage.items[i].computed];
    if (c.is_reduction) accs[i] = declare_thread_acc(em, c, stage.items[i].is_scan ? 0 : chain);
  }
  // Per-row pointwise values are computed by every thread (all of them read them) and
  // stored by thread 0; a per-row stage with reductions runs its one iteration on thread 0.
  const bool loop = !stage.inner.empty() || reductions;
  // In a per-row stage the pointwise values stay at the row's scope, outside that one
  // iteration: later stages read them from registers (placement.cpp keeps them out of
  // memory), and a value bound inside the loop would be gone (fuzz: logsumexp or
  // var_mean over a dim of size 1 on CUDA, "codegen: unknown buffer").
  const bool row_values = stage.inner.empty();
  auto row_value = [&](const KernelItem& item) {
    return row_values && !item.is_scan && !p.computed[item.computed].is_reduction;
  };
  StageItems items{p, stage, pr.m.in_memory, accs, [] { return std::string("(int64_t)j"); }, "if (tid == 0) ",
                   [&](const KernelItem& item) { return !row_value(item); }};
  stored = print_stage_items(em, items);  // the row's values, at its scope
  if (loop) {
    em.open_scope(pr.inner_vars(stage));
    for (const auto& l : pr.decompose_dims("j", stage.inner, "i")) em.line(l);
  }
  items.store_prefix = loop ? "" : "if (tid == 0) ";
  items.skip = row_value;
  stored |= print_stage_items(em, items);  // j: the element's flat index in the row
  if (loop) {
    std::vector<std::string> body = em.close_scope();
    const std::string I = pr.index_type();
    // A per-row stage (no inner dims) runs once; a row of zero elements (a dim of size
    // 0) not at all: its reductions keep their identity, its stores write nothing (the
    // buffer is empty; a store would be an illegal address: fuzz, layer_norm over [0, 31]).
    const std::string n = is_symbolic(stage.inner) ? pr.size_text(product(stage.inner)) : std::to_string(numel(stage.inner));
    // A scan is sequential: thread 0 walks the row (its reductions then combine with
    // the other threads' untouched partials, which are the identity).
    if (scan) em.line("for (" + I + " j = tid == 0 ? 0 : " + n + "; j < " + n + "; ++j) {");
    else {
      em.line("#pragma unroll 4");
      em.line("for (" + I + " j = tid; j < " + n + "; j += " + std::to_string(threads) + ") {");
    }
    for (const auto& l : body) em.line("  " + l);
    em.line("}");
  }
  return finish_row_reductions(pr, stage, accs, row_level) || stored;
}

// Every stage of one row, through the row tile (its chunks accessed as `access` says)
// or, when `tiled` is false, through the per-element loop.
std::vector<std::string> row_stages(CudaPrinter& pr, const RowTile& tile, const ColumnSplit& split, bool tiled,
                                    ChunkAccess access = ChunkAccess::Vector) {
  CEmitter& em = *pr.em;
  const bool warp = pr.launch.shape == CudaKernelInfo::Shape::RowWarp;
  const int lanes = pr.launch.threads;  // a row's lanes, in RowWarp
  const std::string barrier = !warp        ? "__syncthreads();"
                              : lanes == 32 ? "__syncwarp();"
                                            : "__syncwarp(ember_row_lanes<" + std::to_string(lanes) + ">());";
  em.open_scope(pr.outer_vars());
  for (const auto& l : pr.decompose_dims("x", pr.k.outer, "o")) em.line(l);
  pr.pin_own_loads();
  if (tiled) declare_tile_registers(pr, tile, access);
  for (size_t st = 0; st < pr.k.stages.size(); ++st) {
    const int sti = static_cast<int>(st);
    bool stored = tiled && tile.tiled[st] ? print_tile_stage(pr, tile, sti, access) : print_row_stage(pr, split, sti);
    // Later stages read what this one stored, possibly from another thread's element
    // (in the row tile, only where they read it from memory).
    if (stored && st + 1 < pr.k.stages.size() && (!tiled || read_later_from_memory(pr, tile, sti))) em.line(barrier);
  }
  return em.close_scope();
}

}  // namespace

std::vector<std::string> row_body(CudaPrinter& pr, const RowTile& tile, const ColumnSplit& split) {
  const std::string I = pr.index_type();
  const bool warp = pr.launch.shape == CudaKernelInfo::Shape::RowWarp;
  std::vector<std::string> out;
  if (warp) {
    // A row on `threads` consecutive lanes (a power of two: a warp, or one of the short
    // rows a warp holds).
    const int threads = pr.launch.threads;
    int shift = 0;
    while ((1 << shift) < threads) ++shift;
    out.push_back("const " + I + " x = (" + I + ")blockIdx.x * " + std::to_string(pr.launch.rows_per_block) +
                  " + (threadIdx.x >> " + std::to_string(shift) + ");");
    out.push_back("if (x >= " + pr.size_text(pr.launch.rows_dim) + ") return;  /* the row's lanes: their row does not exist */");
    out.push_back("const int tid = threadIdx.x & " + std::to_string(threads - 1) + ";");
  } else {
    // Reductions combine warps' partials through it; arg-reductions' pairs take twice the slots.
    bool pairs = false;
    for (const auto& st : pr.k.stages)
      for (const auto& item : st.items) pairs |= pr.p.computed[item.computed].is_arg_reduction();
    out.push_back(pairs ? "__shared__ uint64_t scratch[64];" : "__shared__ uint64_t scratch[32];");
    out.push_back("const " + I + " x = blockIdx.x;");
    out.push_back("const int tid = threadIdx.x;");
  }
  if (tile.lanes == 0) {
    for (const auto& l : row_stages(pr, tile, split, false)) out.push_back(l);
    return out;
  }
  std::vector<std::string> tiled = row_stages(pr, tile, split, true);
  if (tile.align == 0) {
    for (const auto& l : tiled) out.push_back(l);
    return out;
  }
  // A view may start anywhere: the vector accesses run when their pointers are aligned
  // (rows start at multiples of the chunk: plan_row_tile), else the same tile with
  // accesses element by element (its kept values, some of which no memory holds, stay
  // registers).
  std::set<int> pointers(tile.stores);
  for (const auto& [b, index] : tile.loads) pointers.insert(b);
  std::string aligned;
  for (int b : pointers) aligned += std::string(aligned.empty() ? "" : " | ") + "(uintptr_t)b" + std::to_string(b);
  out.push_back("if (((" + aligned + ") & " + std::to_string(tile.align - 1) + ") == 0) {  /* row tile: vector accesses aligned */");
  for (const auto& l : tiled) out.push_back("  " + l);
  out.push_back("} else {");
  for (const auto& l : row_stages(pr, tile, split, true, ChunkAccess::Elements)) out.push_back("  " + l);
  out.push_back("}");
  return out;
}

bool finish_row_reductions(CudaPrinter& pr, const Stage& stage, std::vector<Acc>& accs, int row_level) {
  CEmitter& em = *pr.em;
  // A row's lanes in RowWarp; 0: the block's threads.
  const int row_lanes = pr.launch.shape == CudaKernelInfo::Shape::RowWarp ? pr.launch.threads : 0;
  bool stored = false;
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const ComputedBuffer& c = pr.p.computed[stage.items[i].computed];
    if (!c.is_reduction || stage.items[i].is_scan) continue;
    Acc& a = accs[i];
    if (c.is_arg_reduction()) {
      combine_arg(em, a, c.reduce_op, row_lanes);
    } else {
      combine(em, a.acc, c.reduce_op, row_lanes);
      if (!a.flag.empty()) combine(em, a.flag, ReduceOp::Any, row_lanes);
    }
    const Buffer& buf = pr.p.buffers[c.buffer];
    std::string result = finish_acc(em, c, a, buf.dtype);
    if (pr.m.in_memory[c.buffer]) {
      em.line("if (tid == 0) " + CEmitter::store_text(em.buffer_name(c.buffer), em.emit(stage.items[i].store_index), buf.dtype, result));
      stored = true;
    }
    em.bind_local(c.buffer, result, row_level);
  }
  return stored;
}

}  // namespace ember
