// Lowering: graph IR -> loop-level Program.
//
// Each graph value becomes a TensorIR: a function from a logical index to an
// Expr (the Inductor "inner_fn" idea). Pointwise ops and views compose these
// functions lazily, so chains of them inline into their consumers and never touch
// memory. A value is *realized* (computed into a buffer by a ComputedBuffer step)
// only when it must be: reductions, graph outputs, inputs of extern ops, inputs
// of reshapes that cannot be expressed as strides, and multiply-used values whose
// body is expensive enough that recomputing it would cost more than storing it.
//
// An op without a lowering, or whose lowering throws Unsupported for particular
// arguments, becomes an ExternCall: ATen runs it. Lowering never fails a compile
// because of an op.
#pragma once
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "lower/program.h"

namespace ember {

using IndexFn = std::function<Expr(const std::vector<Expr>&)>;

struct TensorIR {
  DType dtype = DType::F32;
  Dims sizes;
  IndexFn fn;                          // value at a logical index
  std::optional<StridedView> view;     // set when the value lives in memory
  std::vector<int> origins;            // graph nodes whose work `fn` does
  // Eager's strides for this value when it is a node's output: realizing with
  // them keeps later views and extern operands (a transposed bmm input) as eager
  // has them, instead of forcing a transposing copy.
  Dims preferred_strides;
  // A reshape of a lazy value (ops_view.cpp): the value it reshapes. Readers index
  // through `fn`; realizing it stores that value in its own shape instead and views
  // the result, as a kernel of the producer's shape fuses with the producer.
  std::shared_ptr<const TensorIR> reshaped_from;

  Dim numel() const;
  int rank() const { return static_cast<int>(sizes.size()); }
};

// Thrown by an op lowering that cannot handle these particular arguments.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LowerOptions {
  // Realize a value read more than once (its parts read through slices count as one
  // read: LowerCtx::count_reads) when its body costs at least this much.
  int64_t realize_cost_threshold = 12;
  // In a graph with 2-D convolutions (which run channels-last, extern_layouts.h), 4-D
  // values stored between ops take channels-last strides too, so that the BatchNorm,
  // ReLU and residual kernels between convolutions read and write one layout and no
  // copy converts it (graph outputs keep their declared strides, except a forward's saved
  // activations: Graph::own_layout_outputs). A backward's convolution_backward counts as a
  // convolution. The CUDA target sets it, and Python for CPU graphs.
  bool channels_last_activations = false;
  // ... and only where the convolutions lead the graph (convolutions_lead_the_layout: one
  // per 300 nodes at least), as TorchInductor's layout optimization decides on the GPU;
  // on the CPU, as Inductor's does with oneDNN, any 2-D convolution will do. The CUDA target.
  bool channels_last_needs_many_convolutions = false;
  // Round every op's f16/bf16 result, as eager does (Inductor's emulate_precision_casts).
  // Off: a fused chain of ops computes in f32 and rounds only what it stores, as Inductor
  // does by default; explicit conversions (.to(bf16)) round either way.
  bool emulate_precision_casts = false;
  // A layout copy whose loads step wide along the output's innermost dim iterates along
  // the input's contiguous dim instead (prefer_contiguous_loads in lowering.cpp): GCC
  // cannot vectorize such loads, and strided stores cost little. The CUDA target, whose
  // tiled transposes handle layout changes (codegen/cuda/transpose.h), turns it off.
  bool loads_lead_layout_copies = true;
  // A 2-D convolution's weight read straight from a graph input (a parameter) is passed to
  // the extern as it is, instead of through a channels-last copy made on every call: the
  // runtime prepares it once (oneDNN's packed layout on the CPU) and reuses it while the
  // input's version and data pointer are unchanged (ExternCall::prepared_args). On for
  // the CPU target (PipelineOptions::prepared_weights).
  bool prepared_weights = false;
  // A convolution with a bias runs in ATen without it, and its result is read as a lazy
  // value that adds the bias per channel, so that the bias joins the kernel that reads
  // the convolution (a LayerNorm, a residual add) as Inductor's CUDA lowering has it,
  // where every reader is such a kernel (ops_convolution.cpp: not an output, an extern
  // operand or a flattening view, which store the result whole as ATen's add would).
  // ATen's cuDNN path adds it in an elementwise kernel of its own over the whole output
  // (ConvNeXt-T: 22 of them, 0.48 ms of 5.8 a step on an H100). The CUDA target sets it;
  // oneDNN (the CPU) adds the bias inside the convolution.
  bool convolution_bias_in_kernels = false;
  // Element-wise semantics of ATen's CUDA kernels where they differ from its CPU ones
  // (the CUDA target sets it; ops_pointwise.cpp): a Python number of add, sub, mul and
  // div is read at f32 (opmath), never rounded to f16/bf16, while a 0-d tensor on the
  // device is rounded like any other; division by a number multiplies by its f32
  // reciprocal, and trunc division of f16/bf16 by a 0-d tensor rounds the quotient;
  // pow(x, +-0.5) is sqrt/rsqrt in every dtype.
  bool aten_cuda = false;
  // index_add and scatter_add as ember's scatter-add (ComputedBuffer::add_at: atomic adds
  // of f32, f16 and bf16 values into an f32 buffer, added to `self` by its readers; the
  // CUDA target, unless torch.are_deterministic_algorithms_enabled(): atomics add in no
  // fixed order, and ATen's deterministic path sorts). Off: ATen runs them.
  bool atomic_scatter_add = false;
};

class LowerCtx {
 public:
  LowerCtx(const Graph& g, LowerOptions opts);

  const Graph& graph() const { return graph_; }
  const LowerOptions& options() const { return opts_; }
  Program& program() { return prog_; }
  const Node& node() const { return *node_; }
  const TensorType& out_type(int k = 0) const { return node_->outputs.at(k); }

  // The lowered value of a tensor argument of the current node.
  const TensorIR& tensor(const Arg& a) const;
  const TensorIR& value(ValueRef r) const { return values_.at(r.node).at(r.index); }

  int new_var() { return prog_.num_vars++; }
  // Whether 4-D values stored between ops take channels-last strides in this graph
  // (LowerOptions::channels_last_activations and the graph has 2-D convolutions).
  bool channels_last() const { return channels_last_; }
  // Whether output `index` of the node being lowered is read by another node or returned.
  bool output_used(int index) const;
  // Whether a graph value is typed `opaque` (graph.h): ATen's alone.
  bool is_opaque(ValueRef r) const;

  // Builders used by op lowerings.
  TensorIR from_view(const StridedView& v) const;
  // A lazy value with the current node as its origin (plus the given inputs').
  TensorIR lazy(DType t, Dims sizes, IndexFn fn, std::initializer_list<const TensorIR*> inputs) const;
  // Whether a lazy value's ops are cheap enough to compute again wherever it is read
  // (LowerOptions::realize_cost_threshold; index arithmetic not counted).
  bool cheap_to_recompute(const TensorIR& t) const;
  // A reshape of a lazy value stored in the shape it had before the reshape, viewed with
  // `strides`, when a view of it can give them (reshape.cpp); none otherwise.
  std::optional<TensorIR> realize_before_reshape(const TensorIR& t, const Dims& strides);
  // The strides to store v in for argument `arg_index` of extern op n (eager's type `eager`),
  // or nullopt to pass it as stored(v) gives it (extern_args.cpp).
  std::optional<std::vector<int64_t>> extern_arg_layout(const Node& n, int arg_index, const TensorIR& v,
                                                         const TensorType& eager) const;
  // Whether v, argument `arg_index` of extern op n, is a parameter the runtime prepares once
  // (LowerOptions::prepared_weights): then it is passed as it is (extern_args.cpp).
  bool prepared_arg(const Node& n, int arg_index, const TensorIR& v) const;
  // Computes `t` into a new buffer with `strides` (contiguous if empty) and returns
  // the stored value. A value already in memory with that layout is returned as is.
  TensorIR realize(const TensorIR& t, Dims strides = {});
  // A value in memory: `t` if stored, else realized contiguously.
  TensorIR stored(const TensorIR& t);
  // `t` stored with `strides`, where a 0 stride on a dim of size > 1 stores the value once
  // along that dim (eager broadcast it there, so it does not vary): the compact value is
  // realized and the returned view expands it.
  TensorIR realize_broadcast(const TensorIR& t, const Dims& strides);
  // Reduces `in` over `dims` into a new buffer of dtype `out` (keepdim layout),
  // accumulating in `acc`. Returns the keepdim value; callers squeeze if needed.
  TensorIR reduce(const TensorIR& in, const std::vector<int64_t>& dims, ReduceOp op, DType out, DType acc);
  // Inclusive scan of `in` along `dim` (Sum: cumsum, Prod: cumprod, LogSumExp:
  // logcumsumexp) into a new buffer.
  TensorIR scan(const TensorIR& in, int64_t dim, ReduceOp op, DType out, DType acc);
  // A scatter-add (ComputedBuffer::add_at) into a new f32 buffer of sizes `target`, zero
  // at first: each point idx of `sizes` adds value(idx), in f32, at target coordinates
  // at(idx) (i64; a data-dependent coordinate out of range adds 0 to a clamped element).
  // `origins`: the graph nodes whose work `value` does. Returns the buffer (ops_indexing.cpp).
  TensorIR scatter_add(const Dims& target, const Dims& sizes, const IndexFn& value,
                       const std::function<std::vector<Expr>(const std::vector<Expr>&)>& at,
                       const std::vector<int>& origins);

  // The node being lowered as an ATen call, with the tensor arguments `none_args` (node
  // argument positions) passed as None: its outputs, in memory.
  std::vector<TensorIR> extern_call(const std::string& reason, const std::vector<size_t>& none_args);

  // Driver entry points.
  void run(const Node& n);
  void finish();

 private:
  // A new buffer for a ComputedBuffer step; commit() appends the step (in
  // execution order) and returns the stored value it produces.
  int new_computed_buffer(DType t, const Dims& sizes, const Dims& strides);
  TensorIR commit(ComputedBuffer c);
  void lower_input(const Node& n);
  void lower_extern(const Node& n, const std::string& reason, const std::vector<size_t>& none_args = {});
  // Why `n` must run in ATen because it reads or returns an opaque value, if it does.
  std::optional<std::string> opaque_reason(const Node& n) const;
  void after_node(const Node& n);
  // Per node output, how many times each of its elements would be computed on average
  // if it stayed lazy (count_reads.cpp; kept in reads_: a multiply-used value is stored
  // only when above kReadOnce). A consuming op reads every element once; a view (a
  // slice, a reshape, an expand) passes on its readers' reads scaled by its elements over
  // the value's, so slices that cut a value into parts (Swin's patch merging, a chunk)
  // read it once between them, and the value stays lazy inside their consumer (a cat).
  static std::vector<std::vector<double>> count_reads(const Graph& g);
  static constexpr double kReadOnce = 1.0 + 1e-6;

  const Graph& graph_;
  LowerOptions opts_;
  bool channels_last_ = false;  // opts_.channels_last_activations, and the graph has 2-D convolutions
  Program prog_;
  const Node* node_ = nullptr;
  std::vector<std::vector<TensorIR>> values_;
  std::vector<int> uses_;
  // Per node and output: the strides the copies reading it ask for (copy_layouts.h), or empty.
  std::vector<std::vector<std::vector<int64_t>>> copy_requested_;
  std::vector<std::vector<double>> reads_;
  std::set<std::pair<int, int>> used_outputs_;  // (node, output index)
  std::vector<bool> is_output_;
  // Graph outputs (node, output index) that leave in the layout ember stores them in
  // (Graph::own_layout_outputs), unless another output position also returns them.
  std::set<std::pair<int, int>> own_layout_;
};

using LowerFn = std::function<std::vector<TensorIR>(LowerCtx&, const Node&)>;
using LoweringTable = std::unordered_map<std::string, LowerFn>;

// The op tables, one per op family (each defined in its own ops_*.cpp).
void register_pointwise_ops(LoweringTable& t);
void register_reduction_ops(LoweringTable& t);
void register_view_ops(LoweringTable& t);
void register_view_scatter_ops(LoweringTable& t);
void register_indexing_ops(LoweringTable& t);
void register_pooling_ops(LoweringTable& t);
void register_creation_ops(LoweringTable& t);
void register_convolution_ops(LoweringTable& t);

const LoweringTable& lowering_table();
// Ops whose eager result is a view of another tensor's storage (ops_view.cpp).
bool is_view_op(const std::string& op);
// Why an op without a lowering runs in ATen (library kernel, randomness, or a gap).
std::string extern_reason(const std::string& op);
bool has_lowering(const std::string& op);

Program lower_graph(const Graph& g, const LowerOptions& opts = {});

// ---- helpers shared by op lowerings -------------------------------------------
// Throws Unsupported when a tensor argument or result of `n` has a symbolic size:
// lowerings that handle static shapes only call it first (the op then runs in ATen).
void require_static(const LowerCtx& ctx, const Node& n);
int64_t normalize_dim(int64_t dim, int64_t rank);
// Whether a layout broadcasts a dim of size > 1 (stride 0 there).
bool has_broadcast_dim(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
// torch's computeStride: strides that view `sizes`/`strides` as `shape`, if any.
std::optional<Dims> view_strides(const Dims& sizes, const Dims& strides, const Dims& shape);
// Whether two sizes of one broadcast dim agree: equal, or (symbolic) equal at the hints:
// Dynamo traced the op with them as one dim, and its guards keep that true.
bool compatible(const Dim& a, const Dim& b);
bool compatible(const Dims& a, const Dims& b);
Dims broadcast_shapes(const Dims& a, const Dims& b);
// Where a slice of a dim of `size` starting at `start` begins, for a non-empty slice
// (Python's negative starts count from the end). A symbolic start's sign is its
// hint's: Dynamo guarded it when it normalized the slice.
Dim slice_start(const Dim& start, const Dim& size);
// Index into `from` (a broadcast source) given an index of the broadcast result.
std::vector<Expr> broadcast_index(const std::vector<Expr>& idx, const Dims& from);

}  // namespace ember
