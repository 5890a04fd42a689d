#include "schedule/cuda/schedule_cuda.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace ember {

namespace {

// Throws CudaUnsupported, naming the kernel and the construct, for what the CUDA path
// cannot express yet.
void refuse_unsupported(const Kernel& k, const Program& p) {
  auto refuse = [&](const std::string& what) {
    throw CudaUnsupported("CUDA codegen does not handle " + what + " yet (kernel " + k.name + ")");
  };
  // A graph with symbols prints the general forms (codegen/cuda/kernel.h), which read
  // symbolic sizes as expressions over `sym`; the other plans need static sizes.
  if (p.num_symbols > kMaxCudaSymbols)
    refuse("more than " + std::to_string(kMaxCudaSymbols) + " symbols (" + std::to_string(p.num_symbols) + ")");
  for (const auto& st : k.stages) {
    if (st.split > 1) refuse("split reduction stages");
    // A vector stage's lanes are sized at compile time (fuse.cpp keeps its kept dim static).
    if (st.vector_reduce && (st.inner.empty() || !st.inner[0].is_static())) refuse("a vector stage of symbolic width");
    for (const auto& item : st.items)
      if (p.computed[item.computed].is_arg_reduction() && st.vector_reduce)
        refuse("arg-reductions across rows (argmax, argmin over an outer dim)");
  }
}

// The kernel's parameters (the buffers it stores to memory, and those it reads other
// than locally), in id order, and the graph nodes whose work it does.
void collect_args(const Program& p, const Schedule& s, const Placement& m, int ki, CudaKernelInfo& info) {
  std::set<int> args, writes, origins;
  const Kernel& k = s.kernels[ki];
  for (size_t st = 0; st < k.stages.size(); ++st)
    for (const auto& item : k.stages[st].items) {
      int b = p.computed[item.computed].buffer;
      if (m.in_memory[b]) {
        args.insert(b);
        writes.insert(b);
      }
      auto read = [&](const Expr& e) {
        const int b = static_cast<int>(e->ival);
        // A value of this kernel that no memory holds is read from the row tile's registers.
        if (m.producer[b].kernel == ki && !m.in_memory[b]) return;
        if (!read_is_local(m.producer[b], s, ki, static_cast<int>(st), VectorResults::InMemory)) args.insert(b);
      };
      walk_loads(item.value, read);
      if (item.scatter_add) walk_loads(item.store_index, read);  // its indices
      for (int o : p.computed[item.computed].origins) origins.insert(o);
    }
  info.args.assign(args.begin(), args.end());
  info.writes.assign(writes.begin(), writes.end());
  info.origins.assign(origins.begin(), origins.end());
}

template <class C>
std::string list(const C& c, const char* prefix = "") {
  std::string out;
  for (const auto& x : c) out += (out.empty() ? "" : " ") + std::string(prefix) + std::to_string(x);
  return out.empty() ? "-" : out;
}

std::string var_text(int v) {
  return v >= kInnerVarBase ? "i" + std::to_string(v - kInnerVarBase) : "o" + std::to_string(v - kOuterVarBase);
}

// A scatter-add kernel (KernelItem::scatter_add, alone in its kernel: fuse.cpp) adds into
// a buffer that its first launch, <name>_partial, zeroes: kScatterZeroThreads threads a
// block, kScatterZeroPerThread elements a thread (four 16-byte stores), at most
// kMaxScatterZeroGrid blocks (grid-stride). Its adds run in the Elementwise shape
// (choose_launch).
constexpr int64_t kScatterZeroThreads = 256;
constexpr int64_t kScatterZeroPerThread = 16;
constexpr int64_t kMaxScatterZeroGrid = 4096;

// Its sizes are static (lowering), also in a graph with symbols elsewhere, whose launches
// then count the adds' grid per call (choose_launch) and take the zeroing's as planned.
void plan_scatter_zeroing(const Program& p, const Kernel& k, CudaKernelInfo& info) {
  if (info.shape != CudaKernelInfo::Shape::Elementwise)
    throw CudaUnsupported("CUDA codegen: a scatter-add that is not an elementwise kernel (kernel " + k.name + ")");
  int64_t elements = 0;
  for (const auto& item : k.stages.at(0).items)
    elements = std::max(elements, p.buffers[p.computed[item.computed].buffer].extent().hint());
  const int64_t tile = kScatterZeroThreads * kScatterZeroPerThread;
  info.partial_block = static_cast<uint32_t>(kScatterZeroThreads);
  info.partial_grid = static_cast<uint32_t>(std::clamp<int64_t>((elements + tile - 1) / tile, 1, kMaxScatterZeroGrid));
}

void launch_text(std::ostream& os, const CudaKernelSchedule& ks) {
  const CudaKernelInfo& i = ks.info;
  const CudaLaunch& l = ks.launch;
  os << "kernel " << i.name << ": " << cuda_shape_name(i.shape) << " grid " << i.grid << " block " << i.block;
  if (ks.min_blocks) os << " (at least " << ks.min_blocks << " blocks an SM)";
  if (i.grid_multiple) os << " (a multiple of " << i.grid_multiple << ")";
  if (i.grid_per_block)
    os << " (per call: " << print_dim(i.grid_units) << " / " << i.grid_per_block << (i.grid_cap ? " capped at " : "")
       << (i.grid_cap ? std::to_string(i.grid_cap) : "") << ")";
  os << "\n  buffers: args " << list(i.args, "buf") << "; writes " << list(i.writes, "buf") << "; origins "
     << list(i.origins, "%") << (ks.scratch >= 0 ? "; scratch buf" + std::to_string(ks.scratch) : "") << "\n";
  if (i.partial_grid > 0 && ks.column_split.chunks == 0)
    os << "  scatter-add: zeroed first on grid " << i.partial_grid << " block " << i.partial_block << "\n";
  os << "  geometry: rows " << print_dim(l.rows_dim) << ", elements " << print_dim(l.total_dim) << ", threads a row "
     << l.threads << ", elements a thread " << l.per_thread << ", block " << l.block << ", rows a block "
     << l.rows_per_block << (l.wide ? ", 64-bit indices" : "") << (l.symbolic ? ", symbolic" : "") << "\n";
}

void transpose_text(std::ostream& os, const TransposePlan& t) {
  auto side = [&](const char* name, const TransposePlan::Side& s) {
    os << " " << name << " [";
    for (size_t d = 0; d < s.vars.size(); ++d) os << (d ? " " : "") << var_text(s.vars[d]) << "=" << print_dim(s.sizes[d]);
    os << "] tile " << s.tile << ";";
  };
  os << "  transpose:";
  side("load", t.load);
  side("store", t.store);
  os << " rest [";
  for (size_t d = 0; d < t.rest_vars.size(); ++d) os << (d ? " " : "") << var_text(t.rest_vars[d]) << "=" << print_dim(t.rest_sizes[d]);
  os << "]; staged " << list(t.staged, "buf") << "; lanes " << t.load_lanes << "/" << t.store_lanes
     << (t.wide ? "; 64-bit" : "") << "\n";
}

void vector_text(std::ostream& os, const VectorPlan& v) {
  os << "  vector path: " << v.lanes << " lanes along " << var_text(v.v) << " (" << v.extent << "); stores "
     << list(v.stores, "buf") << "\n";
  for (size_t w = 0; w < v.words.size(); ++w) {
    const VectorPlan::Word& word = v.words[w];
    os << "    word " << word.name << " = buf" << word.buffer << "[" << to_string(word.index) << "]"
       << (word.invariant ? " invariant" : "") << (word.clamp ? " clamped" : "") << (v.kept.count(w) ? " hoisted" : "")
       << (v.loop_words.count(w) ? "" : " not in the loop") << "\n";
  }
  for (size_t h = 0; h < v.hoisted.size(); ++h) os << "    hoisted h" << h << " = " << to_string(v.hoisted[h]) << "\n";
  if (!v.hoisted.empty()) os << "    hoisted registers " << v.hoisted_registers << "\n";
}

void row_tile_text(std::ostream& os, const RowTile& t) {
  os << "  row tile: " << t.lanes << " lanes, " << t.chunks << " chunks, " << t.slots << " slots; tiled stages";
  for (size_t st = 0; st < t.tiled.size(); ++st)
    if (t.tiled[st]) os << " " << st;
  os << "; loads";
  for (const auto& [b, e] : t.loads) os << " buf" << b << "[" << to_string(e) << "]";
  os << "; stores " << list(t.stores, "buf") << "; cached";
  for (int b : t.cached) os << " buf" << b << "@" << t.first_read.at(b);
  os << "; kept " << list(t.kept, "buf");
  if (!t.unstored.empty()) os << "; registers only " << list(t.unstored, "buf");
  for (const auto& value : t.values) os << "; kept@" << value.stage << " " << to_string(value.value);
  os << "; aligned to " << t.align << "\n";
}

void scan_text(std::ostream& os, const ScanColumns& c) {
  os << "  scan columns: " << c.segments << " segments of " << c.length << " along " << c.extent << ", " << c.columns
     << " columns a block; carried items " << list(c.carried) << "\n";
}

void column_split_text(std::ostream& os, const ColumnSplit& c, const CudaKernelInfo& info) {
  os << "  column split: " << c.chunks << " chunks on grid " << info.partial_grid << " block " << info.partial_block
     << "; scratch " << c.scratch_bytes << " bytes;";
  if (c.lanes > 0)
    os << " " << c.lanes << " columns a thread, tiles of " << c.column_threads << " threads x " << c.tiles << ", "
       << c.row_groups << " row groups a block;";
  else if (c.rows > 1)
    os << " " << c.rows << " rows, " << c.groups << " groups of " << c.group_lanes << " lanes a block;";
  std::map<int, int64_t> offsets(c.partial_offset.begin(), c.partial_offset.end());
  for (const auto& [item, offset] : offsets) os << " item " << item << " at " << offset;
  os << "\n";
}

}  // namespace

std::string CudaKernelSchedule::text() const {
  std::ostringstream os;
  launch_text(os, *this);
  if (launch.transpose) transpose_text(os, *launch.transpose);
  if (vector.lanes > 0) vector_text(os, vector);
  if (row_tile.lanes > 0) row_tile_text(os, row_tile);
  if (column_split.chunks > 0) column_split_text(os, column_split, info);
  if (scan.segments > 0) scan_text(os, scan);
  return os.str();
}

uint64_t CudaKernelSchedule::hash() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the same in every process
  for (unsigned char c : text()) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string CudaSchedule::text() const {
  std::string out;
  for (const auto& k : kernels) out += k.text();
  return out;
}

CudaKernelSchedule schedule_cuda_kernel(const Program& p, const Schedule& s, const Placement& m, int k,
                                        const LaunchChoice& choice, int scratch_id) {
  const Kernel& kernel = s.kernels[k];
  refuse_unsupported(kernel, p);
  CudaKernelSchedule ks;
  ks.kernel = k;
  ks.info.name = kernel.name;
  collect_args(p, s, m, k, ks.info);
  ks.launch = choose_launch(p, kernel, m.in_memory, ks.info, choice);
  if (kernel.scatter_adds()) {
    plan_scatter_zeroing(p, kernel, ks.info);
    return ks;  // the scalar elementwise loop: no vector words, tiles or hoisting around atomics
  }
  ks.scan = plan_scan_columns(p, s, k, ks.launch, ks.info);
  // A graph with symbols: vector accesses and row tiles over static rows (symbolic row
  // counts), no hoisting or column splits (their grids are planned from sizes).
  ks.vector = plan_vector(p, s, m, k, ks.launch);
  ks.row_tile = plan_row_tile(p, s, m, k, ks.launch, ks.info);
  if (ks.row_tile.lanes == 0) pack_short_rows(kernel, ks.launch, ks.info);
  if (!ks.launch.symbolic) {
    plan_hoist(ks.vector, p, s, m, k, ks.info);
    ks.column_split = plan_column_split(p, s, m, k, ks.launch, scratch_id, ks.info);
  }
  if (ks.column_split.chunks > 0) ks.scratch = scratch_id;
  ks.min_blocks = hoist_min_blocks(ks.vector, ks.info.block);
  return ks;
}

namespace {

// Kernel k's values that its row tile keeps in registers and that are in memory only
// for the kernel's own later stages (a LayerNorm's input, computed in the kernel:
// ConvNeXt's conv output plus bias, stored in f32 and never read by another kernel):
// the kernel planned again with them out of memory, kept when its tile still keeps them
// all. They then move no bytes, and no longer widen the tile's element (f32 values in
// chunks of 4 beside bf16 rows in chunks of 8). Updates the placement.
CudaKernelSchedule keep_in_registers(const Program& p, const Schedule& s, Placement& m, int k,
                                     const LaunchChoice& choice, int scratch_id, CudaKernelSchedule ks) {
  std::vector<int> values;
  for (int b : ks.row_tile.kept)
    if (m.own_reads_only[b] == k) values.push_back(b);
  if (values.empty()) return ks;
  Placement without = m;
  for (int b : values) without.in_memory[b] = false;
  CudaKernelSchedule again = schedule_cuda_kernel(p, s, without, k, choice, scratch_id);
  if (!tile_keeps_unstored(p, s, without, k, again.row_tile)) return ks;
  for (int b : values) {
    m.in_memory[b] = false;
    m.own_reads_only[b] = -1;
  }
  return again;
}

}  // namespace

CudaSchedule schedule_cuda(Program& p, const Schedule& s, const LaunchChoices& choices) {
  CudaSchedule cs;
  cs.placement = place_buffers(p, s, VectorResults::InMemory);
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    const LaunchChoice choice = k < choices.size() ? choices[k] : LaunchChoice{};
    const int ki = static_cast<int>(k), scratch_id = static_cast<int>(p.buffers.size());
    cs.kernels.push_back(keep_in_registers(p, s, cs.placement, ki, choice, scratch_id,
                                           schedule_cuda_kernel(p, s, cs.placement, ki, choice, scratch_id)));
    const CudaKernelSchedule& ks = cs.kernels.back();
    if (ks.scratch < 0) continue;
    // The partials live in a buffer of their own, alive for the kernel's step only.
    Buffer b;
    b.kind = Buffer::Kind::Computed;
    b.dtype = DType::U8;
    b.sizes = {Dim(ks.column_split.scratch_bytes)};
    b.strides = {Dim(int64_t{1})};
    p.add_buffer(std::move(b));
    cs.placement.in_memory.push_back(true);
    cs.placement.producer.push_back(Producer{});
    cs.placement.own_reads_only.push_back(-1);
  }
  return cs;
}

}  // namespace ember
