#include "codegen/cuda_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "codegen/c_emitter.h"
#include "codegen/cuda_prelude.h"
#include "codegen/cuda_reduction.h"
#include "codegen/cuda_transpose.h"
#include "codegen/cuda_vector_access.h"
#include "codegen/lane_invariant.h"
#include "codegen/placement.h"
#include "ir/affine.h"
#include "ir/size_expr.h"

namespace ember {

namespace {

constexpr int kRowsPerWarpBlock = 8;     // RowWarp: rows (warps) per block
constexpr int kElementwiseBlock = 256;   // Elementwise: threads per block
constexpr int64_t kMaxElementwiseGrid = 1 << 20;  // beyond this, threads loop (grid-stride)
constexpr int64_t kInt32Limit = int64_t{1} << 31;

// Elementwise: elements per thread per grid-stride step. A thread with one 2-byte load
// in flight leaves HBM idle (2,048 threads an SM hold about 4 KiB of requests, Little's
// law wants several times that); a thread that issues the loads of several elements,
// blockDim apart so that each warp-wide load stays coalesced, keeps enough in flight.
// 8 when every buffer has elements of at most 2 bytes (16 bytes a thread per buffer),
// else 4. (The measurement against one element per thread is in docs/benchmarks.md.)
int elementwise_elems_per_thread(int64_t max_elem_bytes) { return max_elem_bytes <= 2 ? 8 : 4; }

void walk_loads(const Expr& e, const std::function<void(const Expr&)>& f) {
  if (e->op == ExprOp::Load) f(e);
  for (const auto& a : e->args) walk_loads(a, f);
}

// walk_loads, saying of each load whether it lies in a Where branch (where the emitter
// clamps its index: it may be out of bounds when the branch is not taken).
void walk_guarded_loads(const Expr& e, bool guarded, const std::function<void(const Expr&, bool)>& f) {
  if (e->op == ExprOp::Load) f(e, guarded);
  for (size_t i = 0; i < e->args.size(); ++i) walk_guarded_loads(e->args[i], guarded || (e->op == ExprOp::Where && i > 0), f);
}

// Throws CudaUnsupported, naming the kernel and the construct, for what this printer
// cannot express yet.
void refuse_unsupported(const Kernel& k, const Program& p) {
  auto refuse = [&](const std::string& what) {
    throw CudaUnsupported("CUDA codegen does not handle " + what + " yet (kernel " + k.name + ")");
  };
  // Below this check every size is static: the printer reads Dims by their values.
  if (p.num_symbols > 0 || is_symbolic(k.outer)) refuse("symbolic sizes");
  for (const auto& st : k.stages) {
    if (is_symbolic(st.inner)) refuse("symbolic sizes");
    if (st.split > 1) refuse("split reduction stages");
    for (const auto& item : st.items) {
      const ComputedBuffer& c = p.computed[item.computed];
      if (c.is_reduction && (c.reduce_op == ReduceOp::ArgMax || c.reduce_op == ReduceOp::ArgMin))
        refuse("arg-reductions (argmax, argmin)");
      if (is_symbolic(item.value) || is_symbolic(item.store_index)) refuse("symbolic sizes");
    }
  }
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}
int64_t numel(const Dims& sizes) { return product(sizes).hint(); }  // static (refuse_unsupported)

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// `flat` split into coordinates over `sizes` (row-major), one `const int64_t` line per
// dim named prefix + d. The divisions run in the type of `flat` (32-bit where sizes allow).
// The names are numbered from `first`.
std::vector<std::string> decompose(const std::string& flat, const std::vector<int64_t>& sizes, const std::string& prefix,
                                   size_t first = 0) {
  std::vector<std::string> lines(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    std::string q = stride == 1 ? flat : "(" + flat + " / " + std::to_string(stride) + ")";
    std::string v = d == 0 ? q : q + " % " + std::to_string(sizes[d]);
    lines[d] = "const int64_t " + prefix + std::to_string(first + d) + " = (int64_t)(" + v + ");";
    stride *= sizes[d];
  }
  return lines;
}

// The innermost inner var at the first lane of a group of consecutive elements (vector
// accesses): an id no kernel var has.
constexpr int kFirstLaneVar = kInnerVarBase + (1 << 20);

// A row kernel's row tile (kRowTileValues, cuda_kernel.h): decided once per kernel by
// plan_row_tile, printed by row_body. Chunk c of a row is elements c * lanes ..
// c * lanes + lanes - 1 (flat over the looping stages' inner dims); thread tid takes
// chunks tid, tid + threads, ..., slot u being chunk u * threads + tid.
struct RowTile {
  int lanes = 0;             // elements a chunk; 0: no row tile
  int64_t chunks = 0;        // chunks a row
  int64_t slots = 0;         // chunks a thread, unrolled, registers kept; 0: a loop
  std::vector<bool> tiled;   // per stage: it loops over the row's elements
  std::map<int, Expr> loads;  // buffers read a chunk at a time (one access), at this index
  std::set<int> stores;       // buffers written a chunk at a time
  std::set<int> cached;       // of `loads`: read once, at the first stage that reads them
  std::map<int, int> first_read;  // cached buffer -> the stage that loads it
  std::set<int> kept;         // this kernel's per-element values later stages read from registers
  int align = 0;              // bytes every chunk access's pointer must be aligned to (0: none)
};

// An elementwise kernel's vector path: decided by plan_vector (and plan_hoist), printed
// by elementwise_vector_body. Each thread takes groups of `lanes` consecutive elements
// along the innermost dim (var v).
struct VectorPlan {
  struct Word {  // one vector load: a buffer at one index, lane u at v = iv + u
    int buffer = 0;
    Expr index;
    std::vector<Expr> loads;  // the Load exprs it stands for (structurally distinct, same index)
    std::string name;         // raw<b>; raw<b>_<n> for a buffer's later indices
    bool invariant = false;   // the index depends on v alone
    bool clamp = false;       // read only under Where branches, possibly out of bounds
  };
  int lanes = 0;  // 0: no vector path
  int v = 0;
  int64_t extent = 0;  // v's
  std::vector<Word> words;
  std::set<int> stores;
  // plan_hoist (kHoistWords): per-lane values computed before the grid-stride loop
  // (h<k>[u]), words loaded there, and the words the loop itself reads.
  std::vector<Expr> hoisted;
  std::set<size_t> kept;
  std::set<size_t> loop_words;
};

class CudaKernelPrinter {
 public:
  CudaKernelPrinter(const Program& p, const Schedule& s, const Placement& m, int k, int scratch_id)
      : p_(p), s_(s), m_(m), ki_(k), k_(s.kernels[k]), scratch_id_(scratch_id) {}

  // The kernel's source (and its partial launch's, for a column split). Sets
  // `scratch_bytes` to the bytes of scratch buffer `scratch_id` it uses (0: none).
  std::string print(CudaKernelInfo& info, int64_t& scratch_bytes) {
    refuse_unsupported(k_, p_);
    info.name = k_.name;
    collect_args(info);
    choose_shape(info);
    plan_vector();
    plan_hoist(info);
    plan_row_tile(info);
    plan_column_split(info);
    scratch_bytes = scratch_bytes_;
    std::string head = signature(k_.name, info.block, info);
    std::vector<std::string> body;
    if (shape_ == CudaKernelInfo::Shape::Transpose) {
      body = transpose_body(*transpose_, p_, k_, m_.in_memory, *em_);
    } else if (shape_ == CudaKernelInfo::Shape::Elementwise) {
      body = elementwise_vector_body();
      std::vector<std::string> scalar = elementwise_body();
      body.insert(body.end(), scalar.begin(), scalar.end());
    } else {
      body = row_body();
    }
    std::ostringstream os;
    os << head;
    for (const auto& l : em_->function_lines()) os << "  " << l << "\n";
    for (const auto& l : body) os << "  " << l << "\n";
    os << "}\n";
    if (chunks_ > 0) os << "\n" << partial_kernel(info);
    return os.str();
  }

 private:
  // `extern "C" __global__ void fname(params) {` over info.args, and a fresh emitter
  // that reads them. The scratch buffer, if any, is raw bytes.
  std::string signature(const std::string& fname, uint32_t block, const CudaKernelInfo& info) {
    std::unordered_map<int, CEmitter::BufferRef> refs;
    std::ostringstream head;
    head << "extern \"C\" __global__ void __launch_bounds__(" << block << ") " << fname << "(";
    for (size_t i = 0; i < info.args.size(); ++i) {
      int b = info.args[i];
      std::string name = "b" + std::to_string(b);
      if (b == scratch_id_) {
        head << (i ? ", " : "") << "unsigned char* __restrict__ " << name;
        continue;
      }
      const Buffer& buf = p_.buffers[b];
      bool written = buf.kind == Buffer::Kind::Computed && m_.producer[b].kernel == ki_;
      head << (i ? ", " : "") << (written ? "" : "const ") << dtype_c_type(buf.dtype) << "* __restrict__ " << name;
      refs[b] = {name, buf.dtype, buf.extent()};
    }
    head << ") {\n";
    em_ = std::make_unique<CEmitter>(refs);
    return head.str();
  }

  // See kColumnSplitBlocks. Only a kernel of one row, printed as one block, whose vector
  // stages read nothing this kernel computes (the partial launch runs none of its other
  // stages), and only when some vector stage reduces at least two chunks of rows.
  void plan_column_split(CudaKernelInfo& info) {
    if (shape_ != CudaKernelInfo::Shape::RowBlock || rows_ != 1) return;
    int64_t most_rows = 0, widest = 0;
    for (const auto& st : k_.stages) {
      if (!st.vector_reduce) continue;
      bool own = false;
      for (const auto& item : st.items)
        walk_loads(item.value, [&](const Expr& e) { own |= m_.producer[e->ival].kernel == ki_; });
      if (own) return;
      most_rows = std::max(most_rows, numel(st.inner) / st.inner[0].hint());
      widest = std::max(widest, st.inner[0].hint());
    }
    if (most_rows < 2 * kColumnSplitMinRows) return;
    const int64_t span = std::max(kColumnSplitMinRows, (most_rows + kColumnSplitBlocks - 1) / kColumnSplitBlocks);
    chunks_ = (most_rows + span - 1) / span;
    // Each vector stage's reduction items get chunks_ x C partials of their accumulator type.
    for (const auto& st : k_.stages) {
      if (!st.vector_reduce) continue;
      const int64_t rows = numel(st.inner) / st.inner[0].hint();
      for (const auto& item : st.items) {
        const ComputedBuffer& c = p_.computed[item.computed];
        scratch_bytes_ = (scratch_bytes_ + 15) / 16 * 16;
        partial_offset_[item.computed] = scratch_bytes_;
        scratch_bytes_ += chunks_ * st.inner[0].hint() * acc_bytes(acc_type(c, rows));
      }
    }
    info.args.push_back(scratch_id_);
    info.partial_grid = static_cast<uint32_t>(chunks_);
    info.partial_block = static_cast<uint32_t>(std::clamp<int64_t>((widest + 31) / 32 * 32, 32, 1024));
  }

  // Element j of chunk `chunk` of item `computed`'s partials, as an lvalue of type `type`.
  std::string partial_ref(int computed, const std::string& type, int64_t width, const std::string& chunk) const {
    return "((" + type + "*)(b" + std::to_string(scratch_id_) + " + " + std::to_string(partial_offset_.at(computed)) +
           "))[" + chunk + " * " + std::to_string(width) + " + i0]";
  }

  // The partial launch: block s reduces chunk s of every vector stage's rows, for all of
  // the stage's kept lanes, and stores each lane's partial (NaN for a float max/min that
  // saw one) to scratch.
  std::string partial_kernel(const CudaKernelInfo& info) {
    const int threads = static_cast<int>(info.partial_block);
    std::string head = signature(k_.name + "_partial", info.partial_block, info);
    const std::string I = index_type();
    em_->open_scope(outer_vars());
    em_->line("const int tid = threadIdx.x;");
    em_->line("const " + I + " s = blockIdx.x;");
    for (const auto& l : decompose("0", hints(k_.outer), "o")) em_->line(l);
    for (const auto& stage : k_.stages) {
      if (!stage.vector_reduce) continue;
      std::vector<int64_t> reduced = hints(stage.inner);
      reduced.erase(reduced.begin());
      const int64_t rows = numel(reduced), width = stage.inner[0].hint();
      const int64_t span = (rows + chunks_ - 1) / chunks_;
      em_->open_scope({{inner_var(0), "i0"}});
      em_->line("const int64_t i0 = (int64_t)(k);");
      std::vector<Acc> accs(stage.items.size());
      for (size_t i = 0; i < stage.items.size(); ++i) accs[i] = declare_acc(*em_, p_.computed[stage.items[i].computed], rows);
      const std::string lo = "s * " + std::to_string(span), n = std::to_string(rows);
      em_->line("const " + I + " hi = " + lo + " + " + std::to_string(span) + " < " + n + " ? " + lo + " + " +
                std::to_string(span) + " : " + n + ";");
      reduce_rows(stage, reduced, accs, lo, "hi");
      for (size_t i = 0; i < stage.items.size(); ++i) {
        const Acc& a = accs[i];
        std::string v = a.flag.empty() ? a.acc : "(" + a.flag + " ? (" + a.type + ")NAN : " + a.acc + ")";
        em_->line(partial_ref(stage.items[i].computed, a.type, width, "s") + " = " + v + ";");
      }
      std::vector<std::string> lanes = em_->close_scope();
      em_->line("for (" + I + " k = tid; k < " + std::to_string(width) + "; k += " + std::to_string(threads) + ") {");
      for (const auto& l : lanes) em_->line("  " + l);
      em_->line("}");
    }
    std::vector<std::string> body = em_->close_scope();
    std::ostringstream os;
    os << head;
    for (const auto& l : em_->function_lines()) os << "  " << l << "\n";
    for (const auto& l : body) os << "  " << l << "\n";
    os << "}\n";
    return os.str();
  }

  void collect_args(CudaKernelInfo& info) {
    std::set<int> args, origins;
    for (size_t st = 0; st < k_.stages.size(); ++st)
      for (const auto& item : k_.stages[st].items) {
        int b = p_.computed[item.computed].buffer;
        if (m_.in_memory[b]) args.insert(b);
        walk_loads(item.value, [&](const Expr& e) {
          if (!read_is_local(m_.producer[e->ival], s_, ki_, static_cast<int>(st), VectorResults::InMemory))
            args.insert(static_cast<int>(e->ival));
        });
        for (int o : p_.computed[item.computed].origins) origins.insert(o);
      }
    info.args.assign(args.begin(), args.end());
    info.origins.assign(origins.begin(), origins.end());
  }

  void choose_shape(CudaKernelInfo& info) {
    bool reductions = false, all_row_scope = true;
    int64_t work = 1;
    for (const auto& st : k_.stages) {
      all_row_scope &= st.inner.empty();
      work = std::max(work, numel(st.inner));
      for (const auto& item : st.items) reductions |= p_.computed[item.computed].is_reduction || item.is_scan;
    }
    rows_ = k_.outer_numel().hint();
    if (!reductions && (k_.stages.size() == 1 || all_row_scope)) {
      shape_ = CudaKernelInfo::Shape::Elementwise;
      total_ = rows_ * (all_row_scope ? 1 : numel(k_.stages[0].inner));
      int64_t max_elem_bytes = 1;
      for (int b : info.args) max_elem_bytes = std::max(max_elem_bytes, dtype_size(p_.buffers[b].dtype));
      per_thread_ = elementwise_elems_per_thread(max_elem_bytes);
      const int64_t tile = int64_t{kElementwiseBlock} * per_thread_;
      info.block = kElementwiseBlock;
      info.grid = static_cast<uint32_t>(std::min(kMaxElementwiseGrid, (total_ + tile - 1) / tile));
      wide_ = total_ + static_cast<int64_t>(info.grid) * tile >= kInt32Limit;
      // A store and a load contiguous along different dims: tiles through shared memory.
      if ((transpose_ = plan_transpose(p_, k_, m_.in_memory))) {
        shape_ = CudaKernelInfo::Shape::Transpose;
        info.block = kTransposeThreads;
        info.grid = transpose_->grid();
      }
    } else if (work <= kWarpRowWork) {
      shape_ = CudaKernelInfo::Shape::RowWarp;
      threads_ = 32;
      info.block = 32 * kRowsPerWarpBlock;
      info.grid = static_cast<uint32_t>((rows_ + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock);
      wide_ = rows_ + kRowsPerWarpBlock >= kInt32Limit || work >= kInt32Limit;
    } else {
      shape_ = CudaKernelInfo::Shape::RowBlock;
      // About sixteen inner iterations per thread (independent loads in flight, fewer
      // barriers per element), between two warps and 1024 threads.
      threads_ = static_cast<int>(std::clamp<int64_t>(pow2_at_least((work + 15) / 16), 64, 1024));
      info.block = threads_;
      if (rows_ >= kInt32Limit) throw CudaUnsupported("CUDA codegen: more than 2^31 rows in kernel " + k_.name);
      info.grid = static_cast<uint32_t>(rows_);
      wide_ = work + threads_ >= kInt32Limit;
    }
    if (rows_ == 0) info.grid = 0;
    info.shape = shape_;
  }

  std::string index_type() const { return wide_ ? "int64_t" : "int"; }

  std::vector<std::pair<int, std::string>> outer_vars() const {
    std::vector<std::pair<int, std::string>> v;
    for (size_t d = 0; d < k_.outer.size(); ++d) v.push_back({outer_var(static_cast<int>(d)), "o" + std::to_string(d)});
    return v;
  }
  std::vector<std::pair<int, std::string>> inner_vars(const Stage& st) const {
    std::vector<std::pair<int, std::string>> v;
    for (size_t d = 0; d < st.inner.size(); ++d) v.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
    return v;
  }

  // Loads of buffers this kernel writes are valid only after the stage that writes them
  // (and its barrier), so they may be hoisted to the row scope but no further.
  void pin_own_loads() {
    for (const auto& stage : k_.stages)
      for (const auto& item : stage.items) em_->set_min_load_level(p_.computed[item.computed].buffer, em_->depth());
  }

  // The C type of a row tile chunk of `lanes` elements of `t`: a vector word, or one element.
  static std::string chunk_type(DType t, int lanes) {
    return lanes == 1 ? dtype_c_type(t) : vector_type(vector_bytes(t, lanes));
  }
  // Lane `lane` of the vector word `word` of buffer b (the word itself, an element, when
  // `lane` is empty), as a local that stands in for the loads of b in the current scope
  // (the value such a load gives: f16/bf16 widened).
  void bind_lane(int b, const std::string& word, const std::string& lane) {
    const DType t = p_.buffers[b].dtype;
    std::string value = lane.empty() ? word : "(" + lane_pointer(t, true) + "&" + word + ")[" + lane + "]";
    if (t == DType::F16) value = "ember_h2f(" + value + ")";
    if (t == DType::BF16) value = "ember_bf2f(" + value + ")";
    const std::string name = "lane" + std::to_string(b);
    em_->line("const " + CEmitter::c_type(t == DType::F16 || t == DType::BF16 ? DType::F32 : t) + " " + name + " = " + value + ";");
    em_->bind_local(b, name, em_->depth());
  }

  // Elementwise kernels whose innermost dim is a multiple of per_thread_ lanes: each
  // thread takes groups of per_thread_ consecutive elements, reads each buffer that is
  // contiguous along that dim with one 16-byte (or 8/4-byte) load, computes the lanes
  // in registers and writes contiguous outputs with one store. Nothing planned when no
  // access would be a vector one.
  void plan_vector() {
    if (shape_ != CudaKernelInfo::Shape::Elementwise) return;
    const Stage& stage = k_.stages[0];
    if (k_.stages.size() != 1 || stage.inner.empty() || per_thread_ <= 1) return;
    VectorPlan plan;
    plan.lanes = per_thread_;
    plan.v = inner_var(static_cast<int>(stage.inner.size()) - 1);
    plan.extent = stage.inner.back().hint();
    if (plan.extent % plan.lanes != 0) return;
    const auto extents = var_extents(stage);
    // Loads, grouped by buffer and index: one word per index that is vector-addressable
    // on its own (max-pool's nine window loads of one buffer are nine words).
    std::vector<VectorPlan::Word> found;
    std::vector<bool> unguarded;
    for (const auto& item : stage.items)
      walk_guarded_loads(item.value, false, [&](const Expr& e, bool guarded) {
        const int b = static_cast<int>(e->ival);
        size_t w = 0;
        while (w < found.size() && !(found[w].buffer == b && same_index(found[w].index, e->args[0]))) ++w;
        if (w == found.size()) {
          found.push_back({b, e->args[0], {}, "", false, false});
          unguarded.push_back(false);
        }
        unguarded[w] = unguarded[w] || !guarded;
        auto& loads = found[w].loads;
        if (std::none_of(loads.begin(), loads.end(), [&](const Expr& l) { return equal(l, e); })) loads.push_back(e);
      });
    std::map<int, int> per_buffer;
    for (size_t w = 0; w < found.size(); ++w) {
      VectorPlan::Word& word = found[w];
      const int b = word.buffer;
      if (m_.producer[b].kernel == ki_ || vector_bytes(p_.buffers[b].dtype, plan.lanes) == 0) continue;
      if (!vector_index(p_, word.index, b, plan.v, plan.lanes, extents)) {
        if (unguarded[w] || !guarded_vector_index(word.index, b, plan.v, plan.lanes)) continue;
        word.clamp = true;
      }
      const int n = per_buffer[b]++;
      word.name = "raw" + std::to_string(b) + (n ? "_" + std::to_string(n) : "");
      word.invariant = depends_only_on(word.index, plan.v);
      plan.words.push_back(std::move(word));
    }
    for (const auto& item : stage.items) {
      int b = p_.computed[item.computed].buffer;
      if (m_.in_memory[b] && vector_bytes(p_.buffers[b].dtype, plan.lanes) > 0 &&
          vector_index(p_, item.store_index, b, plan.v, plan.lanes, extents))
        plan.stores.insert(b);
    }
    if (plan.words.empty() && plan.stores.empty()) return;
    for (size_t w = 0; w < plan.words.size(); ++w) plan.loop_words.insert(w);
    vec_ = std::move(plan);
  }

  // Like vector_index, for a load read only under Where branches, whose index may leave
  // the buffer when the branch is not taken: every word starts at a multiple of `lanes`
  // and the buffer is whole words, so a word lies all inside the buffer or all outside.
  // A lane whose branch is taken reads inside (the guarded-load rule), so its word is
  // inside; a word read clamped into the buffer feeds only lanes whose branch is not.
  bool guarded_vector_index(const Expr& index, int b, int v, int lanes) const {
    auto af = affine_form(index);
    if (!af || p_.buffers[b].extent().hint() % lanes != 0) return false;
    auto it = af->coef.find(v);
    if (it == af->coef.end() || it->second != 1 || af->constant % lanes != 0) return false;
    for (const auto& [var_id, c] : af->coef)
      if (var_id != v && c % lanes != 0) return false;
    return true;
  }

  std::unordered_map<int, int64_t> var_extents(const Stage& stage) const {
    std::unordered_map<int, int64_t> extents;
    for (size_t d = 0; d < k_.outer.size(); ++d) extents[outer_var(static_cast<int>(d))] = k_.outer[d].hint();
    for (size_t d = 0; d < stage.inner.size(); ++d) extents[inner_var(static_cast<int>(d))] = stage.inner[d].hint();
    return extents;
  }

  // The words whose loads `roots` reach, not looking inside `stop` (values computed elsewhere).
  std::set<size_t> words_read(const std::vector<Expr>& roots,
                              const std::unordered_set<Expr, ExprHash, ExprEqual>& stop) const {
    std::set<size_t> read;
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      if (stop.count(e)) return;
      if (e->op == ExprOp::Load)
        for (size_t w = 0; w < vec_.words.size(); ++w)
          for (const auto& l : vec_.words[w].loads)
            if (equal(l, e)) read.insert(w);
      for (const auto& a : e->args) walk(a);
    };
    for (const auto& r : roots) walk(r);
    return read;
  }

  // See kHoistWords. Values first (most costly first), then the invariant words the
  // loop still reads, within the registers given; nothing unless some value is hoisted.
  void plan_hoist(CudaKernelInfo& info) {
    if (vec_.lanes == 0 || info.grid <= kHoistBlocks) return;
    const int64_t step = int64_t{kElementwiseBlock} * vec_.lanes;
    const int64_t multiple = vec_.extent / std::gcd(vec_.extent, step);
    int64_t grid = std::max<int64_t>(kHoistBlocks, (info.grid + kHoistSteps - 1) / kHoistSteps);
    if (multiple * 8 > grid) return;  // rounding up would add more than an eighth
    grid = (grid + multiple - 1) / multiple * multiple;

    std::vector<Expr> roots;
    for (const auto& item : k_.stages[0].items) roots.push_back(item.value);
    auto readable = [&](int b) { return m_.producer[b].kernel != ki_; };
    int64_t budget = kHoistWords;
    std::unordered_set<Expr, ExprHash, ExprEqual> hoisted;
    for (const InvariantValue& c : innermost_invariants(roots, vec_.v, readable)) {
      const int64_t words = vec_.lanes * (dtype_size(c.value->dtype) > 4 ? 2 : 1);
      if (words > budget) continue;
      budget -= words;
      vec_.hoisted.push_back(c.value);
      hoisted.insert(c.value);
    }
    if (vec_.hoisted.empty()) return;
    vec_.loop_words = words_read(roots, hoisted);
    int64_t kept_words = 0;
    for (size_t w : vec_.loop_words) {
      const int64_t words = vector_bytes(p_.buffers[vec_.words[w].buffer].dtype, vec_.lanes) / 4;
      if (!vec_.words[w].invariant || words > budget) continue;
      budget -= words;
      kept_words += words;
      vec_.kept.insert(w);
    }
    info.grid = static_cast<uint32_t>(grid);
    info.hoisted_values = static_cast<uint32_t>(vec_.hoisted.size());
    info.hoisted_words = static_cast<uint32_t>(kept_words);
  }

  // The value lane `lane` of word `w` gives (f16/bf16 widened), as a local that stands in
  // for the word's loads in the current scope.
  void bind_word(const VectorPlan::Word& w, const std::string& lane) {
    const DType t = p_.buffers[w.buffer].dtype;
    std::string value = "(" + lane_pointer(t, true) + "&" + w.name + ")[" + lane + "]";
    if (t == DType::F16) value = "ember_h2f(" + value + ")";
    if (t == DType::BF16) value = "ember_bf2f(" + value + ")";
    const std::string name = "lane" + w.name.substr(3);
    em_->line("const " + CEmitter::c_type(t == DType::F16 || t == DType::BF16 ? DType::F32 : t) + " " + name + " = " + value + ";");
    for (const auto& l : w.loads) em_->bind_value(l, name);
  }

  // `const <vector type> <name> = *(...)(b + index at the group's first lane);`
  void load_word(const VectorPlan::Word& w) {
    const std::string vt = vector_type(vector_bytes(p_.buffers[w.buffer].dtype, vec_.lanes));
    std::string idx = em_->emit(substitute(w.index, {{vec_.v, var(kFirstLaneVar)}}));
    if (w.clamp) idx = "ember_clamp_index(" + idx + ", " + std::to_string(p_.buffers[w.buffer].extent().hint() - vec_.lanes) + "LL)";
    em_->line("const " + vt + " " + w.name + " = *(const " + vt + "*)(b" + std::to_string(w.buffer) + " + " + idx + ");");
  }

  // plan_hoist's values, before the grid-stride loop: the thread's innermost coordinate
  // `hv` (the same in every step), the kept words, and h<k>[u] for each lane u.
  std::vector<std::string> hoisted_values() {
    const std::string I = index_type(), U = std::to_string(vec_.lanes);
    std::vector<std::string> out;
    out.push_back("const " + I + " g0 = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x;");
    out.push_back("const int64_t hv = (int64_t)(g0 * " + U + " % " + std::to_string(vec_.extent) + ");");
    em_->open_scope({{kFirstLaneVar, "hv"}});
    for (size_t w : vec_.kept) load_word(vec_.words[w]);
    std::set<size_t> needed = words_read(vec_.hoisted, {});
    for (size_t k = 0; k < vec_.hoisted.size(); ++k)
      em_->line(CEmitter::c_type(vec_.hoisted[k]->dtype) + " h" + std::to_string(k) + "[" + U + "];");
    em_->open_scope({});
    for (size_t w : needed)
      if (!vec_.kept.count(w)) load_word(vec_.words[w]);
    em_->open_scope({{vec_.v, "(hv + u)"}});
    for (size_t w : needed) bind_word(vec_.words[w], "u");
    for (size_t k = 0; k < vec_.hoisted.size(); ++k) em_->line("h" + std::to_string(k) + "[u] = " + em_->emit(vec_.hoisted[k]) + ";");
    std::vector<std::string> lanes = em_->close_scope();
    std::vector<std::string> block = em_->close_scope();
    em_->line("{");
    for (const auto& l : block) em_->line("  " + l);
    em_->line("  #pragma unroll");
    em_->line("  for (int u = 0; u < " + U + "; ++u) {");
    for (const auto& l : lanes) em_->line("    " + l);
    em_->line("  }");
    em_->line("}");
    for (const auto& l : em_->close_scope()) out.push_back(l);
    return out;
  }

  // The vector path (plan_vector), taken when every vector pointer is 16-byte aligned
  // (checked at run time: a view of a tensor may not be); otherwise the scalar loop
  // below runs.
  std::vector<std::string> elementwise_vector_body() {
    if (vec_.lanes == 0) return {};
    const Stage& stage = k_.stages[0];
    const int U = vec_.lanes;
    const std::string I = index_type();
    std::vector<std::string> before;
    if (!vec_.hoisted.empty()) before = hoisted_values();

    std::vector<std::pair<int, std::string>> group_vars = outer_vars();
    for (size_t d = 0; d + 1 < stage.inner.size(); ++d) group_vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
    group_vars.push_back({kFirstLaneVar, "iv"});
    em_->open_scope(group_vars);
    for (const auto& l : decompose("x", hints(k_.outer), "o")) em_->line(l);
    std::vector<std::string> coords = decompose("j", hints(stage.inner), "i");
    coords.back() = "const int64_t iv" + coords.back().substr(coords.back().find(" = "));
    for (const auto& l : coords) em_->line(l);
    for (size_t w : vec_.loop_words)
      if (!vec_.kept.count(w)) load_word(vec_.words[w]);
    std::map<int, std::string> store_at;
    for (const auto& item : stage.items) {
      int b = p_.computed[item.computed].buffer;
      if (!vec_.stores.count(b) || store_at.count(b)) continue;
      store_at[b] = em_->emit(substitute(item.store_index, {{vec_.v, var(kFirstLaneVar)}}));
      em_->line(vector_type(vector_bytes(p_.buffers[b].dtype, U)) + " out" + std::to_string(b) + ";");
    }
    em_->open_scope({{vec_.v, "(iv + u)"}});
    for (size_t w : vec_.loop_words) bind_word(vec_.words[w], "u");
    for (size_t k = 0; k < vec_.hoisted.size(); ++k) em_->bind_value(vec_.hoisted[k], "h" + std::to_string(k) + "[u]");
    for (const auto& item : stage.items) {
      const ComputedBuffer& c = p_.computed[item.computed];
      std::string val = em_->emit(item.value);
      const DType t = p_.buffers[c.buffer].dtype;
      if (vec_.stores.count(c.buffer))
        em_->line(CEmitter::store_text("(" + lane_pointer(t, false) + "&out" + std::to_string(c.buffer) + ")", "u", t, val));
      else if (m_.in_memory[c.buffer])
        em_->line(CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(item.store_index), t, val));
      em_->bind_local(c.buffer, val, em_->depth());
    }
    std::vector<std::string> lanes = em_->close_scope();
    em_->line("#pragma unroll");
    em_->line("for (int u = 0; u < " + std::to_string(U) + "; ++u) {");
    for (const auto& l : lanes) em_->line("  " + l);
    em_->line("}");
    for (const auto& [b, idx] : store_at) {
      const std::string vt = vector_type(vector_bytes(p_.buffers[b].dtype, U));
      em_->line("*(" + vt + "*)(b" + std::to_string(b) + " + " + idx + ") = out" + std::to_string(b) + ";");
    }
    std::vector<std::string> group = em_->close_scope();

    std::string aligned;
    std::set<int> pointers;
    for (const auto& w : vec_.words) pointers.insert(w.buffer);
    for (const auto& [b, idx] : store_at) pointers.insert(b);
    for (int b : pointers) aligned += std::string(aligned.empty() ? "" : " | ") + "(uintptr_t)b" + std::to_string(b);
    std::string condition = "((" + aligned + ") & 15) == 0";
    std::string why = "every vector pointer 16-byte aligned";
    if (!vec_.hoisted.empty()) {
      // Hoisting holds only on the grid plan_hoist chose: the launch could differ.
      condition += " && ((" + I + ")gridDim.x * blockDim.x * " + std::to_string(U) + ") % " + std::to_string(vec_.extent) + " == 0";
      why += ", the grid-stride step a multiple of " + std::to_string(vec_.extent);
    }
    const int64_t inner = numel(stage.inner);
    const std::string groups = std::to_string(total_ / U);
    std::vector<std::string> out;
    out.push_back("if (" + condition + ") {  /* vector path: " + why + " */");
    for (const auto& l : before) out.push_back("  " + l);
    out.push_back("  for (" + I + " g = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x; g < " + groups + "; g += (" + I +
                  ")gridDim.x * blockDim.x) {");
    out.push_back("    const " + I + " x = g * " + std::to_string(U) + " / " + std::to_string(inner) + ";");
    out.push_back("    const " + I + " j = g * " + std::to_string(U) + " - x * " + std::to_string(inner) + ";");
    for (const auto& l : group) out.push_back("    " + l);
    out.push_back("  }");
    out.push_back("  return;");
    out.push_back("}");
    return out;
  }

  // One thread per element e of rows x inner (or per row, when every stage is per-row).
  std::vector<std::string> elementwise_body() {
    const std::string I = index_type();
    const bool per_row = k_.stages[0].inner.empty() || k_.stages.size() > 1;
    const int64_t inner = per_row ? 1 : numel(k_.stages[0].inner);
    em_->open_scope(outer_vars());
    for (const auto& l : decompose("x", hints(k_.outer), "o")) em_->line(l);
    pin_own_loads();
    for (size_t st = 0; st < k_.stages.size(); ++st) {
      const Stage& stage = k_.stages[st];
      if (!per_row) {
        em_->open_scope(inner_vars(stage));
        for (const auto& l : decompose("j", hints(stage.inner), "i")) em_->line(l);
      }
      for (const auto& item : stage.items) {
        const ComputedBuffer& c = p_.computed[item.computed];
        std::string v = em_->emit(item.value);
        if (m_.in_memory[c.buffer])
          em_->line(CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(item.store_index), p_.buffers[c.buffer].dtype, v));
        em_->bind_local(c.buffer, v, em_->depth());
      }
      if (!per_row)
        for (const auto& l : em_->close_scope()) em_->line(l);
    }
    std::vector<std::string> row = em_->close_scope();
    // The body of one element e, indented by `pad`.
    auto element = [&](std::vector<std::string>& out, const std::string& pad) {
      if (inner == 1) {
        out.push_back(pad + "const " + I + " x = e;");
      } else {
        out.push_back(pad + "const " + I + " x = e / " + std::to_string(inner) + ";");
        out.push_back(pad + "const " + I + " j = e - x * " + std::to_string(inner) + ";");
      }
      for (const auto& l : row) out.push_back(pad + l);
    };
    const std::string total = std::to_string(total_);
    std::vector<std::string> out;
    if (per_thread_ == 1) {
      out.push_back("for (" + I + " e = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x; e < " + total +
                    "; e += (" + I + ")gridDim.x * blockDim.x) {");
      element(out, "  ");
      out.push_back("}");
      return out;
    }
    // Each step takes elements t, t + block, ..., t + (U-1) * block: a full tile unrolled
    // with no bounds checks (its elements' loads issue together), the last partial tile
    // one element at a time. Elements are independent, so their order does not matter.
    const std::string U = std::to_string(per_thread_);
    const std::string block = std::to_string(kElementwiseBlock);
    const std::string tile = std::to_string(int64_t{kElementwiseBlock} * per_thread_);
    out.push_back("for (" + I + " t = (" + I + ")blockIdx.x * " + tile + " + threadIdx.x; t < " + total + "; t += (" + I +
                  ")gridDim.x * " + tile + ") {");
    out.push_back("  if (t + " + std::to_string(int64_t{kElementwiseBlock} * (per_thread_ - 1)) + " < " + total + ") {");
    out.push_back("    #pragma unroll");
    out.push_back("    for (int u = 0; u < " + U + "; ++u) {");
    out.push_back("      const " + I + " e = t + u * " + block + ";");
    element(out, "      ");
    out.push_back("    }");
    out.push_back("  } else {");
    out.push_back("    #pragma unroll 1");
    out.push_back("    for (" + I + " e = t; e < " + total + "; e += " + block + ") {");
    element(out, "      ");
    out.push_back("    }");
    out.push_back("  }");
    out.push_back("}");
    return out;
  }

  // One warp (RowWarp) or one block (RowBlock) per row.
  std::vector<std::string> row_body() {
    const std::string I = index_type();
    const bool warp = shape_ == CudaKernelInfo::Shape::RowWarp;
    std::vector<std::string> out;
    if (warp) {
      out.push_back("const " + I + " x = (" + I + ")blockIdx.x * " + std::to_string(kRowsPerWarpBlock) + " + (threadIdx.x >> 5);");
      out.push_back("if (x >= " + std::to_string(rows_) + ") return;  /* the whole warp: its row does not exist */");
      out.push_back("const int tid = threadIdx.x & 31;");
    } else {
      out.push_back("__shared__ uint64_t scratch[32];");
      out.push_back("const " + I + " x = blockIdx.x;");
      out.push_back("const int tid = threadIdx.x;");
    }
    if (tile_.lanes == 0) {
      for (const auto& l : row_stages(false)) out.push_back(l);
      return out;
    }
    std::vector<std::string> tiled = row_stages(true);
    if (tile_.align == 0) {
      for (const auto& l : tiled) out.push_back(l);
      return out;
    }
    // A view may start anywhere: the vector accesses run when their pointers are aligned
    // (rows start at multiples of the chunk: plan_row_tile), else the scalar loop does.
    std::set<int> pointers(tile_.stores);
    for (const auto& [b, index] : tile_.loads) pointers.insert(b);
    std::string aligned;
    for (int b : pointers) aligned += std::string(aligned.empty() ? "" : " | ") + "(uintptr_t)b" + std::to_string(b);
    out.push_back("if (((" + aligned + ") & " + std::to_string(tile_.align - 1) + ") == 0) {  /* row tile: vector accesses aligned */");
    for (const auto& l : tiled) out.push_back("  " + l);
    out.push_back("} else {");
    for (const auto& l : row_stages(false)) out.push_back("  " + l);
    out.push_back("}");
    return out;
  }

  // Every stage of one row, through the row tile or through the per-element loop.
  std::vector<std::string> row_stages(bool tiled) {
    const std::string barrier = shape_ == CudaKernelInfo::Shape::RowWarp ? "__syncwarp();" : "__syncthreads();";
    em_->open_scope(outer_vars());
    for (const auto& l : decompose("x", hints(k_.outer), "o")) em_->line(l);
    pin_own_loads();
    if (tiled) declare_tile_registers();
    for (size_t st = 0; st < k_.stages.size(); ++st) {
      const int sti = static_cast<int>(st);
      bool stored = tiled && tile_.tiled[st] ? print_tile_stage(sti) : print_row_stage(sti);
      // Later stages read what this one stored, possibly from another thread's element
      // (in the row tile, only where they read it from memory).
      if (stored && st + 1 < k_.stages.size() && (!tiled || read_later_from_memory(sti))) em_->line(barrier);
    }
    return em_->close_scope();
  }

  // Whether a later stage reads from memory a value stage `st` stores (in the row tile,
  // where a kept value is a register).
  bool read_later_from_memory(int st) const {
    bool read = false;
    for (size_t later = st + 1; later < k_.stages.size(); ++later)
      for (const auto& item : k_.stages[later].items)
        walk_loads(item.value, [&](const Expr& e) {
          const Producer& prod = m_.producer[e->ival];
          read |= prod.kernel == ki_ && prod.stage == st && !tile_.kept.count(static_cast<int>(e->ival)) &&
                  !read_is_local(prod, s_, ki_, static_cast<int>(later), VectorResults::InMemory);
        });
    return read;
  }

  // See RowTile. Row shapes with neither vector stages nor scans. The tile takes the
  // looping stages whose inner dims are those of the largest one (so that chunk c of one
  // stage is chunk c of every other, on the same thread); other looping stages (a
  // mask's row fused before a LayerNorm) keep the per-element loop. Only when some
  // buffer is accessed a chunk at a time or kept in registers.
  // A row block's threads share the row tile's chunks evenly where whole warps can: the
  // 384 chunks of a 3,072-wide bf16 row on 256 threads left half of them idle in the
  // second slot; 192 threads take two each. Same slots, fewer threads.
  void even_row_block(CudaKernelInfo& info, int64_t chunks, int64_t slots) {
    const int64_t even = (chunks + slots - 1) / slots;
    const int64_t threads = (even + 31) / 32 * 32;
    if (threads < 64 || threads >= threads_) return;
    threads_ = static_cast<int>(threads);
    info.block = static_cast<uint32_t>(threads_);
  }

  void plan_row_tile(CudaKernelInfo& info) {
    if (shape_ == CudaKernelInfo::Shape::Elementwise) return;
    const Stage* looping = nullptr;
    for (const auto& st : k_.stages) {
      if (st.vector_reduce) return;
      for (const auto& item : st.items)
        if (item.is_scan) return;
      if (!st.inner.empty() && (!looping || numel(st.inner) > numel(looping->inner))) looping = &st;
    }
    if (!looping || numel(looping->inner) == 0) return;
    RowTile t;
    for (const auto& st : k_.stages) t.tiled.push_back(!st.inner.empty() && hints(st.inner) == hints(looping->inner));

    // Each buffer's index where the tiled stages read it from memory (one index, or it
    // is read element by element), and how many stages read it.
    std::map<int, Expr> index;
    std::set<int> mixed, read_untiled;
    std::map<int, int> readers;
    for (size_t st = 0; st < k_.stages.size(); ++st) {
      std::set<int> here;
      for (const auto& item : k_.stages[st].items)
        walk_loads(item.value, [&](const Expr& e) {
          const int b = static_cast<int>(e->ival);
          if (read_is_local(m_.producer[b], s_, ki_, static_cast<int>(st), VectorResults::InMemory)) return;
          if (!t.tiled[st]) {
            read_untiled.insert(b);
            return;
          }
          auto [it, fresh] = index.emplace(b, e->args[0]);
          if (!fresh && !same_index(it->second, e->args[0])) mixed.insert(b);
          if (here.insert(b).second && !t.first_read.count(b)) t.first_read[b] = static_cast<int>(st);
        });
      for (int b : here) ++readers[b];
    }
    std::map<int, Expr> written;  // per-element values the tiled stages store
    for (size_t st = 0; st < k_.stages.size(); ++st)
      for (const auto& item : k_.stages[st].items) {
        const int b = p_.computed[item.computed].buffer;
        if (t.tiled[st] && !item.is_reduction && m_.in_memory[b]) written.emplace(b, item.store_index);
      }
    std::unordered_map<int, int64_t> extents;
    for (size_t d = 0; d < k_.outer.size(); ++d) extents[outer_var(static_cast<int>(d))] = k_.outer[d].hint();
    for (size_t d = 0; d < looping->inner.size(); ++d) extents[inner_var(static_cast<int>(d))] = looping->inner[d].hint();
    const int v = inner_var(static_cast<int>(looping->inner.size()) - 1);
    auto chunk_access = [&](int b, const Expr& e, int lanes) {
      return vector_bytes(p_.buffers[b].dtype, lanes) > 0 && vector_index(p_, e, b, v, lanes, extents);
    };

    // Lanes: 16 bytes of the widest element a chunk access may move (per-row results,
    // index and mask buffers never are), fewer when the row's last dim asks.
    int64_t widest = 1;
    for (const auto& [b, e] : index)
      if (!mixed.count(b) && chunk_access(b, e, 1)) widest = std::max(widest, dtype_size(p_.buffers[b].dtype));
    for (const auto& [b, e] : written)
      if (chunk_access(b, e, 1)) widest = std::max(widest, dtype_size(p_.buffers[b].dtype));
    t.lanes = elementwise_elems_per_thread(widest);
    while (t.lanes > 1 && looping->inner.back().hint() % t.lanes != 0) t.lanes /= 2;
    t.chunks = numel(looping->inner) / t.lanes;
    const int64_t slots = (t.chunks + threads_ - 1) / threads_;
    if (slots * t.lanes <= kRowTileValues) t.slots = slots;
    if (t.slots > 0 && shape_ == CudaKernelInfo::Shape::RowBlock) even_row_block(info, t.chunks, slots);
    for (const auto& [b, e] : index)
      if (!mixed.count(b) && chunk_access(b, e, t.lanes)) t.loads[b] = e;
    for (const auto& [b, e] : written)
      if (t.lanes > 1 && chunk_access(b, e, t.lanes)) t.stores.insert(b);

    // Registers, within kRowTileBytes a thread: first the buffers of the row itself
    // that several stages read, then kept values, then broadcast buffers (a LayerNorm's
    // weight; its reads hit the cache anyway).
    if (t.slots > 0) {
      int64_t budget = kRowTileBytes;
      auto take = [&](int64_t bytes) {
        if (bytes > budget) return false;
        budget -= bytes;
        return true;
      };
      auto per_row = [&](const Expr& e) {
        auto af = affine_form(e);
        if (!af) return false;
        for (const auto& [var_id, c] : af->coef)
          if (var_id >= kOuterVarBase && var_id < kInnerVarBase) return true;
        return false;
      };
      auto cache = [&](bool row) {
        for (const auto& [b, e] : t.loads)
          if (readers[b] >= 2 && m_.producer[b].kernel != ki_ && per_row(e) == row &&
              take(t.slots * vector_bytes(p_.buffers[b].dtype, t.lanes)))
            t.cached.insert(b);
      };
      cache(true);
      for (size_t st = 0; st < k_.stages.size(); ++st)
        for (const auto& item : k_.stages[st].items) {
          const int b = p_.computed[item.computed].buffer;
          auto it = index.find(b);
          if (!t.tiled[st] || item.is_reduction || it == index.end() || mixed.count(b) || read_untiled.count(b) ||
              !same_index(it->second, item.store_index))
            continue;
          const std::string type = CEmitter::c_type(p_.buffers[b].dtype);
          if (take(t.slots * t.lanes * (type == "int64_t" || type == "double" ? 8 : 4))) t.kept.insert(b);
        }
      cache(false);
    }
    for (int b : t.kept) t.loads.erase(b);
    for (auto it = t.first_read.begin(); it != t.first_read.end();)
      it = t.cached.count(it->first) ? std::next(it) : t.first_read.erase(it);
    // Scalar accesses and no registers kept: the per-element loop is the same.
    if ((t.loads.empty() && t.stores.empty()) || (t.lanes == 1 && t.slots == 0)) return;
    if (t.lanes > 1) {
      for (const auto& [b, e] : t.loads) t.align = std::max(t.align, vector_bytes(p_.buffers[b].dtype, t.lanes));
      for (int b : t.stores) t.align = std::max(t.align, vector_bytes(p_.buffers[b].dtype, t.lanes));
    }
    info.row_lanes = static_cast<uint32_t>(t.lanes);
    info.row_slots = static_cast<uint32_t>(t.slots);
    info.row_cached.assign(t.cached.begin(), t.cached.end());
    tile_ = std::move(t);
  }

  // The row tile's registers: each cached buffer's chunks (row<b>[slot], raw words) and
  // each kept value (kept<b>[slot * lanes + lane]).
  void declare_tile_registers() {
    const std::string slots = std::to_string(tile_.slots);
    for (int b : tile_.cached)
      em_->line(chunk_type(p_.buffers[b].dtype, tile_.lanes) + " row" + std::to_string(b) + "[" + slots + "];");
    for (int b : tile_.kept)
      em_->line(CEmitter::c_type(p_.buffers[b].dtype) + " kept" + std::to_string(b) + "[" +
                std::to_string(tile_.slots * tile_.lanes) + "];");
  }

  // A looping stage through the row tile: each of the thread's chunks reads every tile
  // buffer with one access (or takes its registers), computes its lanes, and writes
  // tile outputs with one access. Returns whether the stage stored anything.
  bool print_tile_stage(int st) {
    const Stage& stage = k_.stages[st];
    const int row_level = em_->depth();
    const int L = tile_.lanes;
    const std::string I = index_type();
    const bool unrolled = tile_.slots > 0;
    const int64_t per_thread = L * (unrolled ? tile_.slots : (tile_.chunks + threads_ - 1) / threads_);
    std::vector<Acc> accs(stage.items.size());
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const ComputedBuffer& c = p_.computed[stage.items[i].computed];
      if (c.is_reduction) accs[i] = declare_acc(*em_, c, per_thread);
    }
    const int v = inner_var(static_cast<int>(stage.inner.size()) - 1);
    std::vector<std::pair<int, std::string>> chunk_vars;
    for (size_t d = 0; d + 1 < stage.inner.size(); ++d) chunk_vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
    chunk_vars.push_back({kFirstLaneVar, "iv"});
    em_->open_scope(chunk_vars);
    std::vector<std::string> coords = decompose(L == 1 ? "c" : "c * " + std::to_string(L), hints(stage.inner), "i");
    coords.back() = "const int64_t iv" + coords.back().substr(coords.back().find(" = "));
    for (const auto& l : coords) em_->line(l);

    // What this stage reads from memory, and the words its lanes come from.
    std::set<int> read, kept_read;
    for (const auto& item : stage.items)
      walk_loads(item.value, [&](const Expr& e) {
        const int b = static_cast<int>(e->ival);
        if (read_is_local(m_.producer[b], s_, ki_, st, VectorResults::InMemory)) return;
        if (tile_.loads.count(b)) read.insert(b);
        if (tile_.kept.count(b)) kept_read.insert(b);
      });
    const std::unordered_map<int, Expr> at_first = {{v, var(kFirstLaneVar)}};
    std::map<int, std::string> word;
    for (int b : read) {
      const bool cached = tile_.cached.count(b) > 0;
      word[b] = (cached ? "row" : "raw") + std::to_string(b) + (cached ? "[u]" : "");
      if (cached && tile_.first_read.at(b) != st) continue;  // in registers already
      const std::string vt = chunk_type(p_.buffers[b].dtype, L);
      const std::string load = "*(const " + vt + "*)(b" + std::to_string(b) + " + " + em_->emit(substitute(tile_.loads.at(b), at_first)) + ")";
      em_->line((cached ? "" : "const " + vt + " ") + word[b] + " = " + load + ";");
    }
    std::map<int, std::string> store_at;
    for (const auto& item : stage.items) {
      const int b = p_.computed[item.computed].buffer;
      if (!tile_.stores.count(b) || item.is_reduction || store_at.count(b)) continue;
      store_at[b] = em_->emit(substitute(item.store_index, at_first));
      em_->line(chunk_type(p_.buffers[b].dtype, L) + " out" + std::to_string(b) + ";");
    }

    const std::string lane = L == 1 ? "" : "l";
    const std::string kept_at = L == 1 ? "[u]" : "[u * " + std::to_string(L) + " + l]";
    em_->open_scope({{v, L == 1 ? "iv" : "(iv + l)"}});
    for (int b : read) bind_lane(b, word[b], lane);
    for (int b : kept_read) em_->bind_local(b, "kept" + std::to_string(b) + kept_at, em_->depth());
    bool stored = false;
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const KernelItem& item = stage.items[i];
      const ComputedBuffer& c = p_.computed[item.computed];
      const std::string val = em_->emit(item.value);
      if (c.is_reduction) {
        accumulate(*em_, c, accs[i], val);
        continue;
      }
      const DType t = p_.buffers[c.buffer].dtype;
      if (store_at.count(c.buffer))
        em_->line(CEmitter::store_text("(" + lane_pointer(t, false) + "&out" + std::to_string(c.buffer) + ")", lane, t, val));
      else if (m_.in_memory[c.buffer])
        em_->line(CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(item.store_index), t, val));
      stored |= m_.in_memory[c.buffer];
      if (tile_.kept.count(c.buffer)) em_->line("kept" + std::to_string(c.buffer) + kept_at + " = " + val + ";");
      em_->bind_local(c.buffer, val, em_->depth());
    }
    std::vector<std::string> lanes = em_->close_scope();
    if (L == 1) {
      for (const auto& l : lanes) em_->line(l);
    } else {
      em_->line("#pragma unroll");
      em_->line("for (int l = 0; l < " + std::to_string(L) + "; ++l) {");
      for (const auto& l : lanes) em_->line("  " + l);
      em_->line("}");
    }
    for (const auto& [b, idx] : store_at) {
      const std::string vt = chunk_type(p_.buffers[b].dtype, L);
      em_->line("*(" + vt + "*)(b" + std::to_string(b) + " + " + idx + ") = out" + std::to_string(b) + ";");
    }
    std::vector<std::string> body = em_->close_scope();

    const std::string chunks = std::to_string(tile_.chunks), threads = std::to_string(threads_);
    if (unrolled) {
      // Slot u is the same chunk in every stage: its registers stay with this thread.
      const std::string last = std::to_string(tile_.slots - 1);
      const bool ragged = tile_.chunks % threads_ != 0;
      em_->line("#pragma unroll");
      em_->line("for (int u = 0; u < " + std::to_string(tile_.slots) + "; ++u) {");
      em_->line("  const " + I + " c = u * " + threads + " + tid;");
      if (ragged) em_->line("  if (u < " + last + " || c < " + chunks + ") {  /* the last slot: chunks past the row's end */");
      for (const auto& l : body) em_->line((ragged ? "    " : "  ") + l);
      if (ragged) em_->line("  }");
      em_->line("}");
    } else {
      em_->line("#pragma unroll 4");
      em_->line("for (" + I + " c = tid; c < " + chunks + "; c += " + threads + ") {");
      for (const auto& l : body) em_->line("  " + l);
      em_->line("}");
    }
    return finish_row_reductions(stage, accs, row_level) || stored;
  }

  // Returns whether the stage stored anything to memory.
  bool print_row_stage(int st) {
    const Stage& stage = k_.stages[st];
    if (stage.vector_reduce) return print_vector_stage(stage);
    const int row_level = em_->depth();
    bool reductions = false, stored = false;
    bool scan = false;
    for (const auto& item : stage.items) {
      reductions |= p_.computed[item.computed].is_reduction;
      scan |= item.is_scan;
    }
    std::vector<Acc> accs(stage.items.size());
    // Elements each thread accumulates (all of them on thread 0 for a scan stage).
    const int64_t chain = scan ? numel(stage.inner) : (numel(stage.inner) + threads_ - 1) / threads_;
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const ComputedBuffer& c = p_.computed[stage.items[i].computed];
      if (c.is_reduction) accs[i] = declare_acc(*em_, c, stage.items[i].is_scan ? 0 : chain);
    }
    // Per-row pointwise values are computed by every thread (all of them read them) and
    // stored by thread 0; a per-row stage with reductions runs its one iteration on thread 0.
    const bool loop = !stage.inner.empty() || reductions;
    if (loop) {
      em_->open_scope(inner_vars(stage));
      for (const auto& l : decompose("j", hints(stage.inner), "i")) em_->line(l);
    }
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const KernelItem& item = stage.items[i];
      const ComputedBuffer& c = p_.computed[item.computed];
      std::string v = em_->emit(item.value);
      if (item.is_scan) {
        // The running value after this step is the element: stored, and a local here.
        em_->line(accs[i].acc + (c.reduce_op == ReduceOp::Prod ? " *= " : " += ") + v + ";");
        std::string step = em_->fresh("scan");
        std::string conv = accs[i].acc;
        const DType t = p_.buffers[c.buffer].dtype;
        if (t == DType::F16) conv = "ember_round_h(" + conv + ")";
        if (t == DType::BF16) conv = "ember_round_bf(" + conv + ")";
        em_->line("const " + CEmitter::c_type(t) + " " + step + " = " + conv + ";");
        if (m_.in_memory[c.buffer]) {
          em_->line(CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(item.store_index), t, step));
          stored = true;
        }
        em_->bind_local(c.buffer, step, em_->depth());
        continue;
      }
      if (c.is_reduction) {
        accumulate(*em_, c, accs[i], v);
        continue;
      }
      if (m_.in_memory[c.buffer]) {
        std::string store = CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(item.store_index), p_.buffers[c.buffer].dtype, v);
        em_->line(loop ? store : "if (tid == 0) " + store);
        stored = true;
      }
      em_->bind_local(c.buffer, v, em_->depth());
    }
    if (loop) {
      std::vector<std::string> body = em_->close_scope();
      const std::string I = index_type();
      const std::string n = std::to_string(std::max<int64_t>(1, numel(stage.inner)));
      // A scan is sequential: thread 0 walks the row (its reductions then combine with
      // the other threads' untouched partials, which are the identity).
      if (scan) em_->line("for (" + I + " j = tid == 0 ? 0 : " + n + "; j < " + n + "; ++j) {");
      else {
        em_->line("#pragma unroll 4");
        em_->line("for (" + I + " j = tid; j < " + n + "; j += " + std::to_string(threads_) + ") {");
      }
      for (const auto& l : body) em_->line("  " + l);
      em_->line("}");
    }
    return finish_row_reductions(stage, accs, row_level) || stored;
  }

  // Combines each reduction's per-thread partials; every thread gets the row's result,
  // a local at `row_level`, and thread 0 stores it. Returns whether anything was stored.
  bool finish_row_reductions(const Stage& stage, std::vector<Acc>& accs, int row_level) {
    const bool warp = shape_ == CudaKernelInfo::Shape::RowWarp;
    bool stored = false;
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const ComputedBuffer& c = p_.computed[stage.items[i].computed];
      if (!c.is_reduction || stage.items[i].is_scan) continue;
      Acc& a = accs[i];
      combine(*em_, a.acc, c.reduce_op, warp);
      if (!a.flag.empty()) combine(*em_, a.flag, ReduceOp::Any, warp);
      const Buffer& buf = p_.buffers[c.buffer];
      std::string result = finish_acc(*em_, c, a, buf.dtype);
      if (m_.in_memory[c.buffer]) {
        em_->line("if (tid == 0) " + CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(stage.items[i].store_index), buf.dtype, result));
        stored = true;
      }
      em_->bind_local(c.buffer, result, row_level);
    }
    return stored;
  }

  // A vector stage's reduced rows r in [lo, hi) (C expressions), flattened over
  // inner[1..] (`reduced`), accumulated into `accs` for the current kept lane i0.
  void reduce_rows(const Stage& stage, const std::vector<int64_t>& reduced, std::vector<Acc>& accs,
                   const std::string& lo, const std::string& hi) {
    std::vector<std::pair<int, std::string>> vars;
    for (size_t d = 1; d < stage.inner.size(); ++d) vars.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
    em_->open_scope(vars);
    for (const auto& l : decompose("r", reduced, "i", 1)) em_->line(l);
    for (size_t i = 0; i < stage.items.size(); ++i)
      accumulate(*em_, p_.computed[stage.items[i].computed], accs[i], em_->emit(stage.items[i].value));
    std::vector<std::string> body = em_->close_scope();
    em_->line("for (" + index_type() + " r = " + lo + "; r < " + hi + "; ++r) {");
    for (const auto& l : body) em_->line("  " + l);
    em_->line("}");
  }

  // A vector stage: inner[0] is a kept dim, contiguous in memory; inner[1..] are reduced.
  // Each thread takes kept lanes tid, tid + threads, ... (coalesced across the warp) and
  // reduces its lanes alone, so no partials cross threads. Results go to memory.
  bool print_vector_stage(const Stage& stage) {
    const std::string I = index_type();
    em_->open_scope({{inner_var(0), "i0"}});
    em_->line("const int64_t i0 = (int64_t)(k);");
    std::vector<Acc> accs(stage.items.size());
    std::vector<int64_t> reduced = hints(stage.inner);
    reduced.erase(reduced.begin());
    for (size_t i = 0; i < stage.items.size(); ++i) accs[i] = declare_acc(*em_, p_.computed[stage.items[i].computed], numel(reduced));
    if (chunks_ > 0) {
      // A column split: the partial launch reduced the rows; combine its chunks in order.
      em_->line("for (int s = 0; s < " + std::to_string(chunks_) + "; ++s) {");
      for (size_t i = 0; i < stage.items.size(); ++i) {
        em_->open_scope({});
        accumulate(*em_, p_.computed[stage.items[i].computed], accs[i],
                   partial_ref(stage.items[i].computed, accs[i].type, stage.inner[0].hint(), "s"));
        for (const auto& l : em_->close_scope()) em_->line("  " + l);
      }
      em_->line("}");
    } else {
      reduce_rows(stage, reduced, accs, "0", std::to_string(numel(reduced)));
    }
    for (size_t i = 0; i < stage.items.size(); ++i) {
      const ComputedBuffer& c = p_.computed[stage.items[i].computed];
      const Buffer& buf = p_.buffers[c.buffer];
      std::string result = finish_acc(*em_, c, accs[i], buf.dtype);
      em_->line(CEmitter::store_text("b" + std::to_string(c.buffer), em_->emit(stage.items[i].store_index), buf.dtype, result));
    }
    std::vector<std::string> lanes = em_->close_scope();
    em_->line("for (" + I + " k = tid; k < " + std::to_string(stage.inner[0].hint()) + "; k += " + std::to_string(threads_) + ") {");
    for (const auto& l : lanes) em_->line("  " + l);
    em_->line("}");
    return true;
  }

  const Program& p_;
  const Schedule& s_;
  const Placement& m_;
  int ki_;
  const Kernel& k_;
  std::unique_ptr<CEmitter> em_;
  CudaKernelInfo::Shape shape_ = CudaKernelInfo::Shape::Elementwise;
  int64_t rows_ = 1, total_ = 1;
  int threads_ = 32;  // threads per row (row shapes)
  int per_thread_ = 1;  // elements per thread per step (elementwise)
  bool wide_ = false;  // 64-bit loop indices
  std::optional<TransposePlan> transpose_;  // the Transpose shape's tiles
  // Column split (plan_column_split): chunks of rows (0: none), scratch buffer id and
  // bytes, and each vector-stage item's partials' byte offset in it.
  const int scratch_id_;
  int64_t chunks_ = 0, scratch_bytes_ = 0;
  std::unordered_map<int, int64_t> partial_offset_;
  RowTile tile_;  // plan_row_tile; lanes == 0: none
  VectorPlan vec_;  // plan_vector, plan_hoist; lanes == 0: none
};

}  // namespace

const char* cuda_shape_name(CudaKernelInfo::Shape s) {
  switch (s) {
    case CudaKernelInfo::Shape::Elementwise: return "elementwise";
    case CudaKernelInfo::Shape::Transpose: return "transpose";
    case CudaKernelInfo::Shape::RowWarp: return "row_warp";
    default: return "row_block";
  }
}

CudaCode generate_cuda(const Program& p, const Schedule& s) {
  CudaCode out;
  Placement m = place_buffers(p, s, VectorResults::InMemory);
  out.prelude = cuda_prelude() + "\n";
  out.source = out.prelude;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    CudaKernelInfo info;
    int64_t scratch = 0;
    const int scratch_id = static_cast<int>(p.buffers.size() + out.scratch_bytes.size());
    out.kernel_sources.push_back(CudaKernelPrinter(p, s, m, static_cast<int>(k), scratch_id).print(info, scratch) + "\n");
    if (scratch > 0) out.scratch_bytes.push_back(scratch);
    out.source += out.kernel_sources.back();
    out.kernels.push_back(std::move(info));
  }
  out.buffer_in_memory = m.in_memory;
  return out;
}

}  // namespace ember
