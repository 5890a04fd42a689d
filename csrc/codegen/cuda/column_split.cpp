#include "codegen/cuda/column_split.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "codegen/cuda/reduction.h"
#include "codegen/cuda/vector_access.h"
#include "schedule/accumulator.h"
#include "schedule/cuda/lane_invariant.h"

namespace ember {

namespace {

// Column `col` of chunk `chunk` of row x's partials of item `computed`, as an lvalue of
// type `type`: partials are laid out [row][chunk][column].
std::string partial_ref(const CudaPrinter& pr, const ColumnSplit& split, int computed, const std::string& type,
                        int64_t width, const std::string& chunk, const std::string& col = "i0") {
  return "((" + type + "*)(" + pr.scratch_name + " + " + std::to_string(split.partial_offset.at(computed)) +
         "))[((int64_t)x * " + std::to_string(split.chunks) + " + " + chunk + ") * " + std::to_string(width) + " + " +
         col + "]";
}

// The vector geometry's loads in reduce_rows (schedule/cuda/column_split.h): each row's
// words loaded once, `lanes` consecutive columns from the thread's first column `first`
// (C text), the load of column j (columns[j] == first + j) reading lane j.
struct LaneWords {
  const std::vector<ColumnWord>* words = nullptr;
  std::string first;
  int lanes = 0;
};

// A vector stage's reduced rows r in [lo, hi) (C expressions; every `step`-th one from
// lo), flattened over inner[1..] (`reduced`), accumulated into `accs` for the current
// kept lane i0. With `columns` (C names of kept lanes, one per set of accumulators in
// `more`), the lanes are those instead, each row's loads of all of them side by side in
// one iteration; with `words` too, each row's loads of them are those vector words.
void reduce_rows(CudaPrinter& pr, const Stage& stage, const Dims& reduced, std::vector<Acc>& accs,
                 const std::string& lo, const std::string& hi, const std::vector<std::string>& columns = {},
                 std::vector<std::vector<Acc>>* more = nullptr, const LaneWords* words = nullptr,
                 const std::string& step = "") {
  CEmitter& em = *pr.em;
  // What depends on the column alone (a BatchNorm's 1 / sqrt(var + eps) before a pool),
  // computed for each column before the loop, as one column's scope would hoist it.
  std::vector<std::vector<std::pair<Expr, std::string>>> per_column(columns.size());
  if (!columns.empty()) {
    std::vector<Expr> roots;
    for (const auto& item : stage.items) roots.push_back(item.value);
    const auto invariants = innermost_invariants(roots, inner_var(0), [](int) { return true; });
    for (size_t j = 0; j < columns.size(); ++j) {
      em.open_scope({{inner_var(0), columns[j]}});
      for (const auto& inv : invariants) per_column[j].push_back({inv.value, em.emit(inv.value)});
      for (const auto& l : em.close_scope()) em.line(l);  // the names are the function's own
    }
  }
  std::vector<std::pair<int, std::string>> vars;
  for (size_t d = 1; d < stage.inner.size(); ++d) vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
  em.open_scope(vars);
  for (const auto& l : pr.decompose_dims("r", reduced, "i", 1)) em.line(l);
  std::vector<std::string> raw;  // the words' names
  if (words) {
    for (const auto& w : *words->words) {
      em.open_scope({{inner_var(0), words->first}});
      const std::string idx = em.emit(w.index);
      for (const auto& l : em.close_scope()) em.line(l);
      const std::string vt = vector_type(column_word_bytes(pr.p.buffers[w.buffer].dtype, words->lanes));
      raw.push_back(em.fresh("raw"));
      em.line("const " + vt + " " + raw.back() + " = *(const " + vt + "*)(" + em.buffer_name(w.buffer) + " + " + idx + ");");
    }
  }
  if (columns.empty()) {
    for (size_t i = 0; i < stage.items.size(); ++i)
      accumulate(em, pr.p.computed[stage.items[i].computed], accs[i], em.emit(stage.items[i].value));
  }
  for (size_t j = 0; j < columns.size(); ++j) {
    em.open_scope({{inner_var(0), columns[j]}});
    for (const auto& [value, name] : per_column[j]) em.bind_value(value, name);
    for (size_t w = 0; words && w < words->words->size(); ++w) {
      const ColumnWord& word = (*words->words)[w];
      const DType t = pr.p.buffers[word.buffer].dtype;
      const std::string name = em.fresh("lane");
      const std::string lane = std::to_string(j);
      const bool wide = t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::I32;
      em.line("const " + CEmitter::c_type(t == DType::F16 || t == DType::BF16 ? DType::F32 : t) + " " + name + " = " +
              (wide ? lane_value(t, raw[w], lane) : "((const " + std::string(dtype_c_type(t)) + "*)&" + raw[w] + ")[" + lane + "]") +
              ";");
      for (const auto& l : word.loads) em.bind_value(l, name);
    }
    for (size_t i = 0; i < stage.items.size(); ++i)
      accumulate(em, pr.p.computed[stage.items[i].computed], (*more)[j][i], em.emit(stage.items[i].value));
    std::vector<std::string> lane = em.close_scope();
    em.line("{");
    for (const auto& l : lane) em.line("  " + l);
    em.line("}");
  }
  std::vector<std::string> body = em.close_scope();
  // Independent loads in flight (the sums wait, the loads need not): 8 rows of one column,
  // about 16 loads a thread when each row loads several columns. (16 rows and 32 loads
  // measured no faster on an H200: ResNet-50's training BatchNorm statistics, 1,206 against
  // 1,203 us a step.) With vector words, 8 rows of one word: 128 bytes a thread.
  const size_t unroll = words ? std::max<size_t>(2, 8 / std::max<size_t>(1, words->words->size()))
                        : columns.size() <= 1 ? 8 : std::max<size_t>(2, 16 / columns.size());
  em.line("#pragma unroll " + std::to_string(unroll));
  em.line("for (" + pr.index_type() + " r = " + lo + "; r < " + hi + "; " + (step.empty() ? "++r" : "r += " + step) + ") {");
  for (const auto& l : body) em.line("  " + l);
  em.line("}");
}

// What a partial holds of accumulator `a`: its value, or NaN where a float max/min saw one.
std::string partial_value(const Acc& a) {
  return a.flag.empty() ? a.acc : "(" + a.flag + " ? (" + a.type + ")NAN : " + a.acc + ")";
}

// Adds chunk `chunk`'s partial of each of the stage's items to its accumulator.
void add_partials(CudaPrinter& pr, const ColumnSplit& split, const Stage& stage, std::vector<Acc>& accs,
                  const std::string& chunk) {
  CEmitter& em = *pr.em;
  for (size_t i = 0; i < stage.items.size(); ++i) {
    em.open_scope({});
    accumulate(em, pr.p.computed[stage.items[i].computed], accs[i],
               partial_ref(pr, split, stage.items[i].computed, accs[i].type, stage.inner[0].hint(), chunk));
    for (const auto& l : em.close_scope()) em.line("  " + l);
  }
}

// Stores each of the stage's results from its accumulator.
void store_results(CudaPrinter& pr, const Stage& stage, const std::vector<Acc>& accs) {
  CEmitter& em = *pr.em;
  for (size_t i = 0; i < stage.items.size(); ++i) {
    const ComputedBuffer& c = pr.p.computed[stage.items[i].computed];
    const Buffer& buf = pr.p.buffers[c.buffer];
    // A result nothing reads has no memory (placement.cpp): a later stage whose use of
    // it simplified away (all(...) * 0, GPU fuzz seed 133907: "unordered_map::at").
    if (!pr.m.in_memory[c.buffer]) continue;
    std::string result = finish_acc(em, c, accs[i], buf.dtype);
    em.line(CEmitter::store_text(em.buffer_name(c.buffer), em.emit(stage.items[i].store_index), buf.dtype, result));
  }
}

// Threads that combine one column's partials in a column split's kernel (see
// print_parallel_combine): a power of two, as many as the block holds for the stage's
// columns, at most kCombineParts, and their accumulators within kCombineSharedBytes of
// shared memory. 1: one thread a column, the chunks in order.
constexpr int64_t kCombineParts = 32;
constexpr int64_t kCombineSharedBytes = 24 * 1024;

int64_t combine_parts(const CudaPrinter& pr, const ColumnSplit& split, const Stage& stage) {
  const int64_t width = stage.inner[0].hint();
  const Dims reduced(stage.inner.begin() + 1, stage.inner.end());
  if (is_symbolic(reduced) || width <= 0) return 1;
  int64_t bytes = 0;
  for (const auto& item : stage.items) bytes += width * accumulator_bytes(pr.p.computed[item.computed], numel(reduced));
  int64_t parts = 1;
  while (parts * 2 <= kCombineParts && parts * 2 * width <= pr.launch.threads && parts * 2 <= split.chunks / 2 &&
         parts * 2 * bytes <= kCombineSharedBytes)
    parts *= 2;
  return parts;
}

// A column split's combine on `parts` threads a column: thread (part, column) reduces
// chunks part, part + parts, ... into its accumulator, stores it to shared memory, and
// after a barrier the column's first thread reduces the parts in order. The order is
// fixed by the plan: the same result on every run. (One thread a column walked 1,024
// partials one after another.)
void print_parallel_combine(CudaPrinter& pr, const ColumnSplit& split, const Stage& stage, int64_t parts) {
  CEmitter& em = *pr.em;
  const int64_t width = stage.inner[0].hint();
  const std::string W = std::to_string(width), P = std::to_string(parts);
  const int64_t chain = numel(Dims(stage.inner.begin() + 1, stage.inner.end()));
  std::vector<std::string> shared(stage.items.size());
  std::vector<Acc> accs(stage.items.size());
  em.open_scope({{inner_var(0), "i0"}});
  em.line("const int64_t i0 = (int64_t)(tid % " + W + ");");
  em.line("const int part = tid / " + W + ";");
  for (size_t i = 0; i < stage.items.size(); ++i) accs[i] = declare_thread_acc(em, pr.p.computed[stage.items[i].computed], chain);
  em.line("#pragma unroll 8");
  em.line("for (int s = part; s < " + std::to_string(split.chunks) + "; s += " + P + ") {");
  add_partials(pr, split, stage, accs, "s");
  em.line("}");
  for (size_t i = 0; i < stage.items.size(); ++i) {
    shared[i] = em.fresh("parts");
    em.line(shared[i] + "[part * " + W + " + i0] = " + partial_value(accs[i]) + ";");
  }
  std::vector<std::string> first = em.close_scope();
  for (size_t i = 0; i < stage.items.size(); ++i)
    em.line("__shared__ " + accs[i].type + " " + shared[i] + "[" + std::to_string(parts * width) + "];");
  em.line("if (tid < " + std::to_string(parts * width) + ") {");
  for (const auto& l : first) em.line("  " + l);
  em.line("}");
  em.line("__syncthreads();");
  em.open_scope({{inner_var(0), "i0"}});
  em.line("const int64_t i0 = (int64_t)(tid);");
  std::vector<Acc> total(stage.items.size());
  for (size_t i = 0; i < stage.items.size(); ++i) total[i] = declare_thread_acc(em, pr.p.computed[stage.items[i].computed], chain);
  em.line("#pragma unroll");
  em.line("for (int part = 0; part < " + P + "; ++part) {");
  for (size_t i = 0; i < stage.items.size(); ++i) {
    em.open_scope({});
    accumulate(em, pr.p.computed[stage.items[i].computed], total[i], shared[i] + "[part * " + W + " + i0]");
    for (const auto& l : em.close_scope()) em.line("  " + l);
  }
  em.line("}");
  store_results(pr, stage, total);
  std::vector<std::string> last = em.close_scope();
  em.line("if (tid < " + W + ") {");
  for (const auto& l : last) em.line("  " + l);
  em.line("}");
}

// The partial launch in the vector geometry (schedule/cuda/column_split.h,
// kColumnSplitVectorBlocks): block b takes row x, chunk s and tile `tile` of the columns;
// thread (g, t) of it owns columns c0 .. c0 + lanes - 1 and reads rows lo + g, lo + g +
// row_groups, ... of the chunk, each row's words in one access when every word's buffer is
// aligned to its word (else the same walk with scalar loads). The groups then add their
// accumulators through shared memory, in group order, into the chunk's partials.
std::string vector_partial_kernel(CudaPrinter& pr, const ColumnSplit& split, const CudaKernelInfo& info) {
  std::string head = pr.signature(pr.k.name + "_partial", info.partial_block, info.args);
  CEmitter& em = *pr.em;
  const std::string I = pr.index_type();
  const int64_t lanes = split.lanes, threads = split.column_threads, groups = split.row_groups;
  const int64_t tile_width = threads * lanes;
  const std::string TW = std::to_string(tile_width), G = std::to_string(groups);
  em.open_scope(pr.outer_vars());
  em.line("const int tid = threadIdx.x;");
  em.line("const " + I + " x = (" + I + ")(blockIdx.x / " + std::to_string(split.blocks_per_row) + "u);");
  em.line("const int64_t s = (int64_t)(blockIdx.x % " + std::to_string(split.blocks_per_row) + "u / " +
          std::to_string(split.tiles) + "u);");
  em.line("const int64_t tile = (int64_t)(blockIdx.x % " + std::to_string(split.tiles) + "u) * " + TW + ";");
  em.line("const int g = tid / " + std::to_string(threads) + ";");
  em.line("const int64_t c0 = tile + (int64_t)(tid % " + std::to_string(threads) + ") * " + std::to_string(lanes) + ";");
  for (const auto& l : pr.decompose_dims("x", pr.k.outer, "o")) em.line(l);
  // The run-time half of the vector access: each word's buffer aligned to its word
  // (column_words proved the offsets multiples of `lanes`).
  std::vector<std::vector<ColumnWord>> words;
  std::map<int, int> align;  // buffer -> bytes
  for (const auto& stage : pr.k.stages) {
    if (!stage.vector_reduce) continue;
    words.push_back(*column_words(pr.p, pr.k, stage, static_cast<int>(lanes)));
    for (const auto& w : words.back())
      align[w.buffer] = std::max(align[w.buffer], column_word_bytes(pr.p.buffers[w.buffer].dtype, static_cast<int>(lanes)));
  }
  std::string aligned;
  for (const auto& [b, bytes] : align)
    aligned += std::string(aligned.empty() ? "" : " && ") + "((uintptr_t)" + em.buffer_name(b) + " & " + std::to_string(bytes - 1) + ") == 0";
  em.line("const bool aligned = " + (aligned.empty() ? std::string("true") : aligned) + ";");
  size_t w = 0;
  for (const auto& stage : pr.k.stages) {
    if (!stage.vector_reduce) continue;
    const std::vector<ColumnWord>& stage_words = words[w++];
    std::vector<int64_t> reduced = hints(stage.inner);
    reduced.erase(reduced.begin());
    const int64_t rows = numel(reduced), width = stage.inner[0].hint();
    const int64_t span = (rows + split.chunks - 1) / split.chunks;
    em.open_scope({});
    std::vector<std::string> columns;
    for (int64_t j = 0; j < lanes; ++j) {
      columns.push_back(em.fresh("col"));
      em.line("const int64_t " + columns.back() + " = c0 + " + std::to_string(j) + ";");
    }
    // A thread's rows of a chunk in its own accumulators (a float sum in float: a thread
    // adds span / row_groups rows), the groups' in the partials' type (that of all the
    // rows, which the kernel's combine reads).
    const int64_t chain = (span + groups - 1) / groups;
    std::vector<Acc> unused;
    std::vector<std::vector<Acc>> more(columns.size(), std::vector<Acc>(stage.items.size()));
    for (size_t i = 0; i < stage.items.size(); ++i)
      for (auto& lane : more) lane[i] = declare_thread_acc(em, pr.p.computed[stage.items[i].computed], chain);
    const std::string lo = "s * " + std::to_string(span), n = std::to_string(rows);
    em.line("const int64_t hi = " + lo + " + " + std::to_string(span) + " < " + n + " ? " + lo + " + " +
            std::to_string(span) + " : " + n + ";");
    const LaneWords lane_words{&stage_words, "c0", static_cast<int>(lanes)};
    std::vector<std::vector<std::string>> paths;
    for (const LaneWords* with : {&lane_words, static_cast<const LaneWords*>(nullptr)}) {
      em.open_scope({});
      reduce_rows(pr, stage, to_dims(reduced), unused, lo + " + g", "hi", columns, &more, with, G);
      paths.push_back(em.close_scope());
    }
    em.line("if (aligned) {");
    for (const auto& l : paths[0]) em.line("  " + l);
    em.line("} else {  /* a word's buffer not aligned to its word: the same rows, scalar loads */");
    for (const auto& l : paths[1]) em.line("  " + l);
    em.line("}");
    // The groups' accumulators, added in group order into the chunk's partials.
    std::vector<std::string> shared;
    for (size_t i = 0; i < stage.items.size(); ++i) {
      shared.push_back(em.fresh("groups"));
      em.line("__shared__ " + acc_type(pr.p.computed[stage.items[i].computed], rows) + " " + shared.back() + "[" +
              std::to_string(groups * tile_width) + "];");
      for (size_t j = 0; j < columns.size(); ++j)
        em.line(shared.back() + "[g * " + TW + " + (c0 - tile) + " + std::to_string(j) + "] = " + partial_value(more[j][i]) + ";");
    }
    em.line("__syncthreads();");
    em.open_scope({});
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const ComputedBuffer& c = pr.p.computed[stage.items[i].computed];
      const Acc total = declare_thread_acc(em, c, rows);
      em.open_scope({});
      accumulate(em, c, total, shared[i] + "[q * " + TW + " + c]");
      std::vector<std::string> add = em.close_scope();
      em.line("#pragma unroll 8");
      em.line("for (int q = 0; q < " + G + "; ++q) {");
      for (const auto& l : add) em.line("  " + l);
      em.line("}");
      em.line(partial_ref(pr, split, stage.items[i].computed, total.type, width, "s", "tile + c") + " = " + partial_value(total) + ";");
    }
    std::vector<std::string> combine = em.close_scope();
    em.line("for (int c = tid; c < " + TW + "; c += " + std::to_string(groups * threads) + ") {");
    for (const auto& l : combine) em.line("  " + l);
    em.line("}");
    std::vector<std::string> lines = em.close_scope();
    em.line("{");
    for (const auto& l : lines) em.line("  " + l);
    em.line("}");
  }
  std::vector<std::string> body = em.close_scope();
  return pr.function(head, body);
}

}  // namespace

std::string partial_kernel(CudaPrinter& pr, const ColumnSplit& split, const CudaKernelInfo& info) {
  if (split.lanes > 0) return vector_partial_kernel(pr, split, info);
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
    // A thread takes `per_thread` columns lanes apart at once (see columns_a_thread).
    const int64_t per_thread = columns_a_thread(width, split.group_lanes);
    std::vector<std::string> columns;
    em.open_scope(per_thread == 1 ? std::vector<std::pair<int, std::string>>{{inner_var(0), "i0"}}
                                  : std::vector<std::pair<int, std::string>>{});
    if (per_thread == 1) em.line("const int64_t i0 = (int64_t)(k);");
    for (int64_t j = 0; j < per_thread && per_thread > 1; ++j) {
      columns.push_back(em.fresh("col"));
      em.line("const int64_t " + columns.back() + " = (int64_t)(k) + " + std::to_string(j * split.group_lanes) + ";");
    }
    std::vector<Acc> accs(stage.items.size());
    std::vector<std::vector<Acc>> more(columns.size(), std::vector<Acc>(stage.items.size()));
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const ComputedBuffer& c = pr.p.computed[stage.items[i].computed];
      if (columns.empty()) accs[i] = declare_thread_acc(em, c, rows);
      for (auto& lane : more) lane[i] = declare_thread_acc(em, c, rows);
    }
    const std::string lo = "s * " + std::to_string(span), n = std::to_string(rows);
    em.line("const int64_t hi = " + lo + " + " + std::to_string(span) + " < " + n + " ? " + lo + " + " +
            std::to_string(span) + " : " + n + ";");
    reduce_rows(pr, stage, to_dims(reduced), accs, lo, "hi", columns, &more);
    for (size_t j = 0; j < std::max<size_t>(1, columns.size()); ++j)
      for (size_t i = 0; i < stage.items.size(); ++i) {
        const Acc& a = columns.empty() ? accs[i] : more[j][i];
        const std::string v = partial_value(a);
        em.line(partial_ref(pr, split, stage.items[i].computed, a.type, width, "s", columns.empty() ? "i0" : columns[j]) +
                " = " + v + ";");
      }
    std::vector<std::string> body = em.close_scope();
    em.line("for (" + I + " k = lane; k < " + std::to_string(width) + "; k += " +
            std::to_string(split.group_lanes * per_thread) + ") {");
    for (const auto& l : body) em.line("  " + l);
    em.line("}");
  }
  std::vector<std::string> body = em.close_scope();
  return pr.function(head, body);
}

bool print_vector_stage(CudaPrinter& pr, const ColumnSplit& split, const Stage& stage) {
  CEmitter& em = *pr.em;
  const std::string I = pr.index_type();
  if (const int64_t parts = split.chunks > 0 ? combine_parts(pr, split, stage) : 1; parts > 1) {
    print_parallel_combine(pr, split, stage, parts);
    return true;
  }
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
    add_partials(pr, split, stage, accs, "s");
    em.line("}");
  } else {
    reduce_rows(pr, stage, reduced, accs, "0", pr.size_text(product(reduced)));
  }
  store_results(pr, stage, accs);
  std::vector<std::string> lanes = em.close_scope();
  em.line("for (" + I + " k = tid; k < " + std::to_string(stage.inner[0].hint()) + "; k += " + std::to_string(pr.launch.threads) + ") {");
  for (const auto& l : lanes) em.line("  " + l);
  em.line("}");
  return true;
}

}  // namespace ember
