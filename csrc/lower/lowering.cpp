#include "lower/lowering.h"

#include "ir/simplify.h"
#include "lower/activation_layout.h"
#include "lower/copy_layouts.h"
#include "lower/extern_layouts.h"

#include <algorithm>
#include <numeric>

namespace ember {

Dim TensorIR::numel() const { return product(sizes); }

void require_static(const LowerCtx& ctx, const Node& n) {
  std::function<void(const Arg&)> check = [&](const Arg& a) {
    if (a.is_tensor() && is_symbolic(ctx.value(a.ref).sizes)) throw Unsupported("symbolic sizes (static shapes only)");
    if (a.kind == Arg::Kind::Int && a.sym) throw Unsupported("symbolic argument (static shapes only)");
    for (const auto& x : a.list) check(x);
  };
  for (const auto& a : n.args) check(a);
  for (const auto& t : n.outputs)
    if (!t.sym_sizes.empty() || !t.sym_strides.empty()) throw Unsupported("symbolic sizes (static shapes only)");
}

LowerCtx::LowerCtx(const Graph& g, LowerOptions opts) : graph_(g), opts_(opts), reads_(count_reads(g)) {
  channels_last_ = opts.channels_last_activations && g.symbols.empty() &&
                   (opts.channels_last_needs_many_convolutions ? convolutions_lead_the_layout(g) : has_2d_convolution(g));
  copy_requested_ = copy_requested_strides(g);
  values_.resize(g.nodes.size());
  uses_.assign(g.nodes.size(), 0);
  is_output_.assign(g.nodes.size(), false);
  std::function<void(const Arg&, bool)> count = [&](const Arg& a, bool out) {
    if (a.is_tensor()) {
      ++uses_.at(a.ref.node);
      used_outputs_.insert({a.ref.node, a.ref.index});
      if (out) is_output_.at(a.ref.node) = true;
    }
    for (const auto& x : a.list) count(x, out);
  };
  for (const auto& n : g.nodes)
    for (const auto& a : n.args) count(a, false);
  for (const auto& a : g.outputs) count(a, true);
  if (g.symbols.empty()) {
    std::set<std::pair<int, int>> declared;
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const Arg& a = g.outputs[i];
      if (!a.is_tensor()) continue;
      (g.output_has_own_layout(static_cast<int>(i)) ? own_layout_ : declared).insert({a.ref.node, a.ref.index});
    }
    for (const auto& r : declared) own_layout_.erase(r);
  }
}

bool LowerCtx::is_opaque(ValueRef r) const { return graph_.nodes.at(r.node).outputs.at(r.index).opaque; }

std::optional<std::string> LowerCtx::opaque_reason(const Node& n) const {
  for (const auto& t : n.outputs)
    if (t.opaque) return std::string("its result is a tensor ember does not model (dtype, layout or device)");
  std::function<bool(const Arg&)> reads_opaque = [&](const Arg& a) {
    if (a.is_tensor() && is_opaque(a.ref)) return true;
    return std::any_of(a.list.begin(), a.list.end(), reads_opaque);
  };
  for (const auto& a : n.args)
    if (reads_opaque(a)) return std::string("it reads a tensor ember does not model (dtype, layout or device)");
  return std::nullopt;
}

bool LowerCtx::output_used(int index) const { return used_outputs_.count({node_->id, index}) > 0; }

const TensorIR& LowerCtx::tensor(const Arg& a) const {
  if (!a.is_tensor()) throw Unsupported("expected a tensor argument");
  return value(a.ref);
}

TensorIR LowerCtx::from_view(const StridedView& v) const {
  TensorIR t;
  t.dtype = v.dtype;
  t.sizes = v.sizes;
  t.view = v;
  t.fn = [v](const std::vector<Expr>& idx) { return load(v.buffer, strided_index(idx, v.strides, v.offset), v.dtype); };
  return t;
}

TensorIR LowerCtx::lazy(DType t, Dims sizes, IndexFn fn, std::initializer_list<const TensorIR*> inputs) const {
  TensorIR r;
  r.dtype = t;
  r.sizes = std::move(sizes);
  r.fn = std::move(fn);
  if (node_) r.origins.push_back(node_->id);
  for (const TensorIR* in : inputs)
    if (!in->view) r.origins.insert(r.origins.end(), in->origins.begin(), in->origins.end());
  std::sort(r.origins.begin(), r.origins.end());
  r.origins.erase(std::unique(r.origins.begin(), r.origins.end()), r.origins.end());
  return r;
}

namespace {
// Dims from outermost to innermost in memory; unit dims keep their logical place.
// Symbolic strides compare by their hints: loop order is a choice, not a correctness matter.
std::vector<int> memory_order(const Dims& sizes, const Dims& strides) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (sizes[a] == 1 || sizes[b] == 1) return false;
    return strides[a].hint() > strides[b].hint();
  });
  return order;
}
// A layout change iterates along the dim that is contiguous in its input, with strided
// stores, when the output's innermost dim would not do: a tiny one (NCHW -> NHWC with 3
// channels: a 3-iteration inner loop per row), or, with `wide_loads`, one the input is
// read far apart along (a 2x2 max-pool of an NCHW tensor into channels-last reads
// 1,024 apart per channel: GCC leaves such loads scalar, and walking the input's rows
// with stores 16 apart ran 7x faster, 13 against 92 us). The step that counts as wide
// is codegen's limit for SIMD loops (codegen/c/kernel.cpp, kMaxSimdStep).
constexpr int64_t kWideLoadStep = 32;

void prefer_contiguous_loads(ComputedBuffer& c, bool wide_loads) {
  if (c.iter_order.empty()) return;
  int last = c.iter_order.back();
  const Expr* load = nullptr;
  std::function<void(const Expr&)> first_load = [&](const Expr& e) {
    if (load) return;
    if (e->op == ExprOp::Load) {
      load = &e;
      return;
    }
    for (const auto& a : e->args) first_load(a);
  };
  first_load(c.body);
  if (!load) return;
  auto step = [&](int d) { return c.vars[d] < 0 ? std::optional<int64_t>(0) : coefficient((*load)->args[0], c.vars[d]); };
  // The largest step along a dim the new order may put innermost: 1 for a tiny dim,
  // 2 (a stride-2 window) for a wide one.
  int64_t most = 0;
  if (c.sizes[last].hint() < 8) {
    most = 1;
  } else if (wide_loads) {
    std::optional<int64_t> k = step(last);
    if (k && (*k > kWideLoadStep || *k < -kWideLoadStep)) most = 2;
  }
  if (most == 0) return;
  for (size_t d = 0; d < c.vars.size(); ++d) {
    if (c.vars[d] < 0 || c.sizes[d].hint() < 8) continue;
    std::optional<int64_t> k = step(static_cast<int>(d));
    if (!k || *k < 1 || *k > most) continue;
    c.iter_order.erase(std::find(c.iter_order.begin(), c.iter_order.end(), static_cast<int>(d)));
    c.iter_order.push_back(static_cast<int>(d));
    return;
  }
}

// Each loop var's trip count, for range-based simplification (static ones only:
// a symbolic trip count leaves its var's range open).
std::unordered_map<int, int64_t> var_extents(const ComputedBuffer& c) {
  std::unordered_map<int, int64_t> e;
  for (size_t d = 0; d < c.vars.size(); ++d)
    if (c.vars[d] >= 0 && c.sizes[d].is_static()) e[c.vars[d]] = c.sizes[d].hint();
  for (size_t d = 0; d < c.reduce_vars.size(); ++d)
    if (c.reduce_vars[d] >= 0 && c.reduce_sizes[d].is_static()) e[c.reduce_vars[d]] = c.reduce_sizes[d].hint();
  return e;
}

// Strides eager gives a dense tensor are positive; symbolic ones are (sizes >= 2).
bool positive_strides(const Dims& strides) {
  return std::none_of(strides.begin(), strides.end(), [](const Dim& s) { return s.is_static() && s.hint() <= 0; });
}
}  // namespace

int LowerCtx::new_computed_buffer(DType t, const Dims& sizes, const Dims& strides) {
  Buffer b;
  b.kind = Buffer::Kind::Computed;
  b.dtype = t;
  b.sizes = sizes;
  b.strides = strides;
  return prog_.add_buffer(b);
}

TensorIR LowerCtx::commit(ComputedBuffer c) {
  const Buffer& b = prog_.buffers[c.buffer];
  StridedView v{b.id, b.dtype, b.sizes, b.strides, 0};
  prog_.steps.push_back({Step::Kind::Compute, static_cast<int>(prog_.computed.size())});
  prog_.computed.push_back(std::move(c));
  return from_view(v);
}

TensorIR LowerCtx::realize(const TensorIR& t, Dims strides) {
  if (strides.empty()) strides = contiguous_strides(t.sizes);
  // Strides of size-1 dims address nothing: a [512, 128, 1, 1] weight is channels-last
  // as it is, and torch's layout checks ignore those strides too.
  auto same_layout = [&](const Dims& have) {
    for (size_t d = 0; d < t.sizes.size(); ++d)
      if (!(t.sizes[d] == 1) && have[d] != strides[d]) return false;
    return true;
  };
  if (t.view && same_layout(t.view->strides) && t.view->offset == 0 &&
      prog_.buffers[t.view->buffer].sizes == t.sizes)
    return t;
  if (t.reshaped_from && !t.view)
    if (auto r = realize_before_reshape(t, strides)) return *r;
  ComputedBuffer c;
  c.buffer = new_computed_buffer(t.dtype, t.sizes, strides);
  c.sizes = t.sizes;
  std::vector<Expr> idx;
  for (const Dim& s : t.sizes) {
    if (s == 1) {
      c.vars.push_back(-1);
      idx.push_back(int_const(0));
    } else {
      c.vars.push_back(new_var());
      idx.push_back(var(c.vars.back()));
    }
  }
  c.iter_order = memory_order(t.sizes, strides);
  c.body = simplify_bounds(cast(t.fn(idx), t.dtype), var_extents(c));
  prefer_contiguous_loads(c, opts_.loads_lead_layout_copies);
  // A copy of a value already in memory (a layout change for an extern op) does
  // no op's work: it has no origins, and explain() calls it a layout copy.
  c.origins = t.view ? std::vector<int>{} : t.origins;
  return commit(std::move(c));
}

bool has_broadcast_dim(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && strides[d] == 0) return true;
  return false;
}

TensorIR LowerCtx::realize_broadcast(const TensorIR& t, const Dims& strides) {
  std::vector<bool> once(t.sizes.size(), false);
  TensorIR compact = t;
  compact.view.reset();
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    once[d] = strides[d] == 0 && !(t.sizes[d] == 1);
    if (once[d]) compact.sizes[d] = 1;
  }
  compact.fn = [fn = t.fn, once](const std::vector<Expr>& idx) {
    std::vector<Expr> at = idx;
    for (size_t d = 0; d < at.size(); ++d)
      if (once[d]) at[d] = int_const(0);
    return fn(at);
  };
  StridedView v = *realize(compact, strides).view;
  v.sizes = t.sizes;
  v.strides = strides;
  return from_view(v);
}

TensorIR LowerCtx::stored(const TensorIR& t) {
  if (t.view) return t;
  return realize(t, t.preferred_strides);
}

TensorIR LowerCtx::reduce(const TensorIR& in, const std::vector<int64_t>& dims, ReduceOp op, DType out, DType acc) {
  std::vector<bool> reduced(in.sizes.size(), false);
  // A 0-d input accepts dim 0 / -1 and has nothing to reduce over.
  for (int64_t d : dims) {
    int64_t nd = normalize_dim(d, in.rank());
    if (nd < in.rank()) reduced[nd] = true;
  }

  ComputedBuffer c;
  for (size_t d = 0; d < in.sizes.size(); ++d) c.sizes.push_back(reduced[d] ? 1 : in.sizes[d]);
  c.buffer = new_computed_buffer(out, c.sizes, contiguous_strides(c.sizes));
  c.is_reduction = true;
  c.reduce_op = op;
  c.acc_dtype = acc;
  std::vector<Expr> idx;
  for (size_t d = 0; d < in.sizes.size(); ++d) {
    if (reduced[d]) {
      int v = in.sizes[d] == 1 ? -1 : new_var();
      c.reduce_sizes.push_back(in.sizes[d]);
      c.reduce_vars.push_back(v);
      idx.push_back(v < 0 ? int_const(0) : var(v));
      c.vars.push_back(-1);
    } else {
      int v = in.sizes[d] == 1 ? -1 : new_var();
      c.vars.push_back(v);
      idx.push_back(v < 0 ? int_const(0) : var(v));
    }
  }
  c.iter_order.resize(c.sizes.size());
  std::iota(c.iter_order.begin(), c.iter_order.end(), 0);
  Expr body = in.fn(idx);
  // ArgMax/ArgMin compare in the input's type; others accumulate in `acc`.
  c.body = (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) ? cast(body, compute_type(in.dtype)) : cast(body, acc);
  c.body = simplify_bounds(c.body, var_extents(c));
  c.origins = in.origins;
  if (node_) c.origins.push_back(node_->id);
  std::sort(c.origins.begin(), c.origins.end());
  c.origins.erase(std::unique(c.origins.begin(), c.origins.end()), c.origins.end());
  return commit(std::move(c));
}

TensorIR LowerCtx::scan(const TensorIR& in, int64_t dim, ReduceOp op, DType out, DType acc) {
  ComputedBuffer c;
  c.buffer = new_computed_buffer(out, in.sizes, contiguous_strides(in.sizes));
  c.sizes = in.sizes;
  c.is_reduction = true;
  c.reduce_op = op;
  c.acc_dtype = acc;
  c.scan_dim = static_cast<int>(dim);
  std::vector<Expr> idx;
  for (size_t d = 0; d < in.sizes.size(); ++d) {
    if (static_cast<int64_t>(d) == dim) {
      int v = new_var();
      c.vars.push_back(-1);
      c.reduce_sizes.push_back(in.sizes[d]);
      c.reduce_vars.push_back(v);
      idx.push_back(var(v));
    } else {
      int v = in.sizes[d] == 1 ? -1 : new_var();
      c.vars.push_back(v);
      idx.push_back(v < 0 ? int_const(0) : var(v));
    }
  }
  c.iter_order.resize(c.sizes.size());
  std::iota(c.iter_order.begin(), c.iter_order.end(), 0);
  c.body = simplify_bounds(cast(in.fn(idx), acc), var_extents(c));
  c.origins = in.origins;
  if (node_) c.origins.push_back(node_->id);
  return commit(std::move(c));
}

void LowerCtx::lower_input(const Node& n) {
  const TensorType& t = n.outputs.at(0);
  if (!t.is_tensor) {
    values_[n.id].push_back(TensorIR{});
    return;
  }
  Buffer b;
  b.kind = Buffer::Kind::Input;
  b.opaque = t.opaque;
  b.dtype = t.dtype;
  b.sizes = t.dims();
  b.strides = t.stride_dims();
  b.input_index = static_cast<int>(n.args.at(0).as_int());
  int id = prog_.add_buffer(b);
  StridedView v{id, t.dtype, b.sizes, b.strides, 0};
  values_[n.id].push_back(from_view(v));
}

void LowerCtx::lower_extern(const Node& n, const std::string& reason, const std::vector<size_t>& none_args) {
  ExternCall call;
  call.node = n.id;
  call.op = n.op;
  call.reason = reason;
  int arg_index = 0;
  std::function<void(const Arg&)> collect = [&](const Arg& a) {
    if (a.is_tensor() && is_opaque(a.ref)) {  // ATen's own value, passed as it is
      call.tensor_args.push_back(a.ref);
      call.tensor_views.push_back(*value(a.ref).view);
    } else if (a.is_tensor()) {
      const TensorIR& v = value(a.ref);
      // A parameter the runtime prepares once is passed as it is (extern_args.cpp).
      const bool prepared = prepared_arg(n, arg_index, v);
      if (prepared) call.prepared_args.push_back(static_cast<int>(call.tensor_args.size()));
      auto layout = prepared ? std::nullopt : extern_arg_layout(n, arg_index, v, graph_.type_of(a.ref));
      const bool broadcast = layout && has_broadcast_dim(hints(v.sizes), *layout);
      TensorIR s = broadcast ? realize_broadcast(v, to_dims(*layout)) : layout ? realize(v, to_dims(*layout)) : stored(v);
      // Later users read the stored copy, unless it is in a layout the value would not
      // have been stored in (then they compute or store their own).
      if (!layout || (!broadcast && !v.view && s.view->strides == v.preferred_strides))
        values_[a.ref.node][a.ref.index] = s;
      call.tensor_args.push_back(a.ref);
      call.tensor_views.push_back(*s.view);
    }
    for (const auto& x : a.list) collect(x);
  };
  for (const auto& a : n.args) {
    if (std::count(none_args.begin(), none_args.end(), static_cast<size_t>(arg_index)) && a.is_tensor())
      call.none_args.push_back(a.ref);
    else
      collect(a);
    ++arg_index;
  }
  int call_index = static_cast<int>(prog_.externs.size());
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const TensorType& t = n.outputs[k];
    if (!t.is_tensor) {
      call.output_buffers.push_back(-1);
      values_[n.id].push_back(TensorIR{});
      continue;
    }
    Buffer b;
    b.kind = Buffer::Kind::Extern;
    b.opaque = t.opaque;
    b.dtype = t.dtype;
    b.sizes = t.dims();
    auto layout = graph_.symbols.empty() && !t.opaque ? extern_output_layout(n, static_cast<int>(k)) : std::nullopt;
    b.strides = layout ? to_dims(*layout) : t.stride_dims();
    b.extern_call = call_index;
    b.extern_output = static_cast<int>(k);
    int id = prog_.add_buffer(b);
    call.output_buffers.push_back(id);
    values_[n.id].push_back(from_view(StridedView{id, t.dtype, b.sizes, b.strides, 0}));
  }
  prog_.steps.push_back({Step::Kind::Extern, call_index});
  prog_.externs.push_back(std::move(call));
}

void LowerCtx::after_node(const Node& n) {
  for (size_t k = 0; k < values_[n.id].size(); ++k) {
    TensorIR& t = values_[n.id][k];
    if (!t.fn || t.view) continue;
    const TensorType& type = n.outputs.at(k);
    bool layout_known = type.is_tensor && type.dims() == t.sizes;
    if (is_output_[n.id]) {
      bool own = own_layout_.count({n.id, static_cast<int>(k)}) && !t.preferred_strides.empty();
      t = realize(t, own ? t.preferred_strides : layout_known ? type.stride_dims() : Dims{});
      continue;
    }
    if (uses_[n.id] > 1 && reads_[n.id][k] > kReadOnce) {
      std::vector<Expr> idx;
      for (size_t d = 0; d < t.sizes.size(); ++d) idx.push_back(var(-1000 - static_cast<int>(d)));
      if (cost(t.fn(idx)) >= opts_.realize_cost_threshold)
        t = realize(t, !t.preferred_strides.empty() ? t.preferred_strides : layout_known ? type.stride_dims() : Dims{});
    }
  }
}

namespace {

// The value eager holds after an op that returns f16/bf16: its f32 result rounded.
// Selections (where) round their branches; loads and constants are exact already.
Expr rounded_result(const Expr& e) {
  if (e->dtype != DType::F16 && e->dtype != DType::BF16) return e;
  if (e->op == ExprOp::Cast && e->ival == 0) return rounding_cast(e->args[0], e->dtype);
  if (e->op == ExprOp::Where) return where(e->args[0], rounded_result(e->args[1]), rounded_result(e->args[2]));
  return e;
}

}  // namespace

void LowerCtx::run(const Node& n) {
  node_ = &n;
  if (n.op == "input") {
    lower_input(n);
    return;
  }
  if (n.op == "sym_input") {  // binds a symbol: kernels read its value from the call
    values_[n.id].push_back(TensorIR{});
    return;
  }
  if (std::optional<std::string> why = opaque_reason(n)) {
    lower_extern(n, *why);
    return;
  }
  const auto& table = lowering_table();
  auto it = table.find(n.op);
  if (it == table.end()) {
    lower_extern(n, extern_reason(n.op));
    return;
  }
  // A failed lowering may have realized inputs already; that is harmless.
  size_t steps_before = prog_.steps.size();
  size_t computed_before = prog_.computed.size();
  size_t buffers_before = prog_.buffers.size();
  int vars_before = prog_.num_vars;
  std::optional<std::string> reason;  // set when the op runs in ATen instead
  try {
    std::vector<TensorIR> outs = it->second(*this, n);
    if (outs.size() != n.outputs.size()) throw Unsupported("lowering produced the wrong number of outputs");
    for (size_t k = 0; k < outs.size(); ++k) {
      const TensorType& t = n.outputs[k];
      if (t.is_tensor && (outs[k].sizes != t.dims() || outs[k].dtype != t.dtype))
        throw Unsupported("lowering disagrees with eager on the output type");
      bool dense = t.is_tensor && t.sizes.size() == t.strides.size() && positive_strides(t.stride_dims());
      if (!outs[k].view && dense) {
        const std::vector<int64_t>& asked = copy_requested_[n.id][k];
        outs[k].preferred_strides = channels_last_ && t.sizes.size() == 4 ? activation_strides(outs[k], t.stride_dims())
                                    : !asked.empty()                     ? to_dims(asked)
                                                                         : t.stride_dims();
      }
      // Eager rounds every op's f16/bf16 result except inside a decomposition.
      if (opts_.emulate_precision_casts && !n.internal && outs[k].fn && !outs[k].view && (outs[k].dtype == DType::F16 || outs[k].dtype == DType::BF16)) {
        IndexFn fn = std::move(outs[k].fn);
        outs[k].fn = [fn](const std::vector<Expr>& idx) { return rounded_result(fn(idx)); };
      }
    }
    values_[n.id] = std::move(outs);
  } catch (const Unsupported& e) {
    reason = e.what();
  } catch (const SymbolicValue& e) {
    reason = e.what();  // the op asked for a static integer of a symbolic size
  }
  if (reason) {
    prog_.steps.resize(steps_before);
    prog_.computed.resize(computed_before);
    prog_.buffers.resize(buffers_before);
    prog_.num_vars = vars_before;
    values_[n.id].clear();
    lower_extern(n, *reason);
    return;
  }
  after_node(n);
}

void LowerCtx::finish() {
  node_ = nullptr;
  for (size_t position = 0; position < graph_.outputs.size(); ++position) {
    const Arg& a = graph_.outputs[position];
    ProgramOutput o;
    if (a.is_tensor() && value(a.ref).fn) {
      TensorIR s = stored(value(a.ref));
      if (own_layout_.count({a.ref.node, a.ref.index}) && graph_.output_has_own_layout(static_cast<int>(position)) &&
          prog_.buffers[s.view->buffer].kind != Buffer::Kind::Input && prog_.is_dense_whole_buffer(*s.view)) {
        o.is_tensor = true;
        o.view = *s.view;
        prog_.outputs.push_back(o);
        continue;
      }
      // An output leaves with the strides the graph declares: AOTAutograd compiles the
      // backward for the declared layout of the activations the forward saves, and an
      // extern result may have another (a convolution fed channels-last returns
      // channels-last). Views of inputs keep their layout (they alias the input).
      const TensorType& type = graph_.nodes.at(a.ref.node).outputs.at(a.ref.index);
      const Dims type_strides = type.stride_dims();
      bool dense = type.is_tensor && !type.opaque && type.dims() == s.sizes && type.strides.size() == s.sizes.size() &&
                   positive_strides(type_strides);
      if (dense && prog_.buffers[s.view->buffer].kind != Buffer::Kind::Input) {
        bool differs = false;
        for (size_t d = 0; d < s.sizes.size(); ++d)
          if (!(s.sizes[d] == 1) && !(s.sizes[d] == 0) && s.view->strides[d] != type_strides[d]) differs = true;
        if (differs) s = realize(s, type_strides);
      }
      o.is_tensor = true;
      o.view = *s.view;
    }
    prog_.outputs.push_back(o);
  }
}

std::string extern_reason(const std::string& op) {
  // Library kernels ember calls on purpose; everything else is a gap in lowering.
  static const std::pair<const char*, const char*> kLibrary[] = {
      {"aten.mm.", "matmul: ATen (BLAS)"},
      {"aten.addmm.", "matmul: ATen (BLAS)"},
      {"aten.bmm.", "matmul: ATen (BLAS)"},
      {"aten.baddbmm.", "matmul: ATen (BLAS)"},
      {"aten.convolution.", "convolution: ATen (oneDNN)"},
      {"aten.convolution_backward.", "convolution: ATen (oneDNN)"},
      {"aten._scaled_dot_product_", "attention: ATen fused SDPA kernel"},
      {"aten.native_dropout.", "random: ATen's generator keeps eager's random stream"},
      {"aten.rand", "random: ATen's generator keeps eager's random stream"},
      {"aten.bernoulli", "random: ATen's generator keeps eager's random stream"},
      {"aten.normal", "random: ATen's generator keeps eager's random stream"},
      {"aten.uniform", "random: ATen's generator keeps eager's random stream"},
      {"aten.multinomial", "random: ATen's generator keeps eager's random stream"},
  };
  for (const auto& [prefix, reason] : kLibrary)
    if (op.rfind(prefix, 0) == 0) return reason;
  return "no ember lowering for " + op;
}

const LoweringTable& lowering_table() {
  static const LoweringTable table = [] {
    LoweringTable t;
    register_pointwise_ops(t);
    register_reduction_ops(t);
    register_view_ops(t);
    register_view_scatter_ops(t);
    register_indexing_ops(t);
    register_pooling_ops(t);
    register_creation_ops(t);
    register_convolution_ops(t);
    return t;
  }();
  return table;
}

bool has_lowering(const std::string& op) { return lowering_table().count(op) > 0; }

Program lower_graph(const Graph& g, const LowerOptions& opts) {
  LowerCtx ctx(g, opts);
  ctx.program().num_symbols = static_cast<int>(g.symbols.size());
  ctx.program().symbol_hints = g.hints();
  for (const auto& n : g.nodes) ctx.run(n);
  ctx.finish();
  return std::move(ctx.program());
}

}  // namespace ember
