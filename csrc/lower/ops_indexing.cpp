// Gather-style indexing: embedding, index_select, gather, index.Tensor; scatter
// written as a gather (each output element looks for the index entries that name it);
// and index_add and scatter_add as scatter-adds (program.h: ComputedBuffer::add_at).
//
// Indices are data, so loads through them are not affine. Out-of-range indices
// make eager raise; ember clamps them into range so a kernel can never read
// outside its buffer (the result for such inputs is unspecified, never a crash), and a
// scatter-add adds 0 for them.
#include <cmath>
#include <numeric>

#include "ir/simplify.h"
#include "lower/ops_common.h"

namespace ember {

namespace {

std::vector<TensorIR> one(TensorIR t) { return {std::move(t)}; }

// scatter(self, dim, index, value | src): out = self, then out[..., index[..j..], ...] =
// value (or src[..j..]) for every position j of index. In gather form an output element
// checks the index entries along `dim` that could name it; there are index.size(dim)
// of them, unrolled, so only a short index dim is lowered (cross-entropy's backward
// scatters one entry per row). The last matching entry wins, as in ATen's serial CPU loop.
constexpr int64_t kMaxScatterEntries = 8;

std::vector<TensorIR> lower_scatter(LowerCtx& ctx, const Node& n, bool from_src) {
  const TensorIR& self = ctx.tensor(n.args[0]);
  const TensorIR& index = ctx.tensor(n.args[2]);
  if (self.rank() == 0 || index.rank() != self.rank()) throw Unsupported("scatter of a 0-d tensor");
  int64_t dim = normalize_dim(n.args[1].as_int(), self.rank());
  if (!index.sizes[dim].is_static()) throw Unsupported("scatter with a symbolic index dim (not unrolled)");
  int64_t entries = index.sizes[dim].hint();
  if (entries > kMaxScatterEntries) throw Unsupported("scatter with a long index dim (not unrolled)");
  // Other dims: index covers self's extent (compatible sizes), or a static part of it.
  for (int d = 0; d < self.rank(); ++d) {
    if (d == dim || compatible(index.sizes[d], self.sizes[d])) continue;
    if (!index.sizes[d].is_static() || !self.sizes[d].is_static()) throw Unsupported("scatter with a partial symbolic index");
    if (index.sizes[d].hint() > self.sizes[d].hint()) throw Unsupported("scatter index larger than self");
  }
  if (from_src && !n.args[3].is_tensor()) throw Unsupported("scatter.src without a tensor");
  DType dt = ctx.out_type().dtype;
  const LowerCtx* cp = &ctx;
  Arg value = n.args[3];
  auto fn = [cp, self, index, value, from_src, dim, entries, dt](const std::vector<Expr>& idx) {
    // Positions past index's extent in the other dims are never written; the
    // clamped coordinate keeps the (unused) load in bounds.
    Expr inside;
    std::vector<Expr> at = idx;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (static_cast<int64_t>(d) == dim || compatible(index.sizes[d], self.sizes[d])) continue;
      const int64_t extent = index.sizes[d].hint();
      Expr ok = cmp(ExprOp::Lt, idx[d], int_const(extent));
      inside = inside ? binary(ExprOp::LogicalAnd, inside, ok, DType::Bool) : ok;
      at[d] = binary(ExprOp::Min, idx[d], int_const(extent - 1), DType::I64);
    }
    Expr out = cast(self.fn(idx), dt);
    for (int64_t j = 0; j < entries; ++j) {
      at[dim] = int_const(j);
      Expr hit = cmp(ExprOp::Eq, cast(index.fn(at), DType::I64), idx[dim]);
      if (inside) hit = binary(ExprOp::LogicalAnd, inside, hit, DType::Bool);
      Expr v = from_src ? cast(cp->tensor(value).fn(at), dt) : arg_at(*cp, value, idx, dt);
      out = where(hit, v, out);
    }
    return out;
  };
  if (from_src) return one(ctx.lazy(dt, self.sizes, fn, {&self, &index, &ctx.tensor(n.args[3])}));
  return one(ctx.lazy(dt, self.sizes, fn, {&self, &index}));
}

// An index value read from a tensor, wrapped for negatives when `wrap`, clamped to [0, size).
Expr checked_index(Expr ix, const Dim& size, bool wrap) {
  ix = cast(ix, DType::I64);
  if (wrap) ix = where(cmp(ExprOp::Lt, ix, int_const(0)), add(ix, size.expr()), ix);
  return binary(ExprOp::Min, binary(ExprOp::Max, ix, int_const(0), DType::I64), (size - 1).expr(), DType::I64);
}

// Whether every element of `t` is the constant +0 (a new_zeros, a zeros_like): the sum
// buffer's start (-0.0 + -0.0 is -0.0 in eager, +0.0 in the buffer).
bool is_zeros(LowerCtx& ctx, const TensorIR& t) {
  if (t.view) return false;
  std::vector<Expr> idx;
  for (int d = 0; d < t.rank(); ++d) idx.push_back(var(ctx.new_var()));
  Expr e = t.fn(idx);
  while (e->op == ExprOp::Cast) e = e->args[0];
  return e->is_const() && (is_float(e->dtype) ? e->fval == 0 && !std::signbit(e->fval) : e->ival == 0);
}

// index_add and scatter_add: a scatter-add of the values into an f32 buffer, zero at first,
// and the result `self` plus that sum, computed by its readers (a zero `self` of f32: the
// sum itself). f16 and bf16 values are summed in f32 and rounded once, where ATen rounds
// after every add (its CUDA atomics on 16-bit values): as accurate or more.
std::vector<TensorIR> lower_scatter_add(LowerCtx& ctx, const Node& n, const TensorIR& self, const Dims& sizes,
                                        const IndexFn& value, const std::function<std::vector<Expr>(const std::vector<Expr>&)>& at,
                                        const std::vector<int>& origins) {
  if (!ctx.options().atomic_scatter_add)
    throw Unsupported("scatter-adds run in ATen here (the CPU, or deterministic algorithms on)");
  const DType dt = ctx.out_type().dtype;
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16)
    throw Unsupported(std::string("a scatter-add of ") + dtype_name(dt) + " (atomic adds: f32, f16, bf16)");
  // The zeroing launch and the adds' grid are planned from static sizes (schedule_cuda).
  require_static(ctx, n);
  if (self.rank() == 0) throw Unsupported("a scatter-add into a 0-d tensor");
  if (self.numel().hint() == 0 || product(sizes).hint() == 0) {
    const TensorIR s = self;
    return one(ctx.lazy(dt, self.sizes, [s, dt](const std::vector<Expr>& idx) { return cast(s.fn(idx), dt); }, {&self}));
  }
  TensorIR sum = ctx.scatter_add(self.sizes, sizes, value, at, origins);
  if (dt == DType::F32 && is_zeros(ctx, self)) return one(sum);
  const TensorIR s = self;
  return one(ctx.lazy(dt, self.sizes, [s, sum, dt](const std::vector<Expr>& idx) {
    return cast(binary(ExprOp::Add, cast(s.fn(idx), DType::F32), sum.fn(idx), DType::F32), dt);
  }, {&self}));
}

// Adjacent integer index tensors of an advanced index (x[:, i, j], index_put's list): the
// indexed dims, the index tensors, their broadcast shape, and the shape they index (self's
// dims before them, the broadcast shape, self's dims after). `op` names the op in refusals.
struct AdvancedIndex {
  std::vector<int> dims;
  std::vector<TensorIR> indices;
  Dims broadcast;
  Dims shape;
};

AdvancedIndex advanced_index(LowerCtx& ctx, const TensorIR& self, const std::vector<Arg>& list, const std::string& op) {
  AdvancedIndex a;
  for (size_t d = 0; d < list.size(); ++d) {
    if (list[d].is_none()) continue;
    const TensorIR& ix = ctx.tensor(list[d]);
    if (ix.dtype == DType::Bool || ix.dtype == DType::U8) throw Unsupported(op + " with a boolean mask");
    a.dims.push_back(static_cast<int>(d));
    a.indices.push_back(ix);
    a.broadcast = broadcast_shapes(a.broadcast, ix.sizes);
  }
  if (a.dims.empty()) throw Unsupported(op + " without index tensors");
  for (size_t k = 1; k < a.dims.size(); ++k)
    if (a.dims[k] != a.dims[k - 1] + 1) throw Unsupported(op + " with non-adjacent indices");
  a.shape.assign(self.sizes.begin(), self.sizes.begin() + a.dims.front());
  a.shape.insert(a.shape.end(), a.broadcast.begin(), a.broadcast.end());
  a.shape.insert(a.shape.end(), self.sizes.begin() + a.dims.back() + 1, self.sizes.end());
  return a;
}

}  // namespace

TensorIR LowerCtx::scatter_add(const Dims& target, const Dims& sizes, const IndexFn& value,
                               const std::function<std::vector<Expr>(const std::vector<Expr>&)>& at,
                               const std::vector<int>& origins) {
  ComputedBuffer c;
  const Dims strides = contiguous_strides(target);
  c.buffer = new_computed_buffer(DType::F32, target, strides);
  c.sizes = sizes;
  std::vector<Expr> idx;
  std::unordered_map<int, int64_t> extents;
  for (const Dim& s : sizes) {
    c.vars.push_back(s == 1 ? -1 : new_var());
    idx.push_back(s == 1 ? int_const(0) : var(c.vars.back()));
    if (c.vars.back() >= 0) extents[c.vars.back()] = s.hint();
  }
  c.iter_order.resize(sizes.size());
  std::iota(c.iter_order.begin(), c.iter_order.end(), 0);
  std::vector<Expr> where_to = at(idx);
  Expr inside;
  for (size_t d = 0; d < where_to.size(); ++d) {
    Expr ix = cast(where_to[d], DType::I64);
    if (ix->op == ExprOp::Var || ix->is_const()) {  // a loop of the values: in range by shape
      where_to[d] = ix;
      continue;
    }
    Expr ok = binary(ExprOp::LogicalAnd, cmp(ExprOp::Ge, ix, int_const(0)), cmp(ExprOp::Lt, ix, target[d].expr()),
                     DType::Bool);
    inside = inside ? binary(ExprOp::LogicalAnd, inside, ok, DType::Bool) : ok;
    where_to[d] = binary(ExprOp::Min, binary(ExprOp::Max, ix, int_const(0), DType::I64), (target[d] - 1).expr(), DType::I64);
  }
  Expr v = cast(value(idx), DType::F32);
  if (inside) v = where(inside, v, const_of(0.0, DType::F32));
  c.body = simplify_bounds(v, extents);
  c.add_at = simplify_bounds(strided_index(where_to, strides, 0), extents);
  c.origins = origins;
  if (node_) c.origins.push_back(node_->id);
  std::sort(c.origins.begin(), c.origins.end());
  c.origins.erase(std::unique(c.origins.begin(), c.origins.end()), c.origins.end());
  return commit(std::move(c));
}

void register_indexing_ops(LoweringTable& t) {
  // index_add(self, dim, index, source, alpha): out[.., index[j], ..] += alpha * source[.., j, ..].
  t["aten.index_add.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& self = ctx.tensor(n.args[0]);
    const TensorIR& index = ctx.tensor(n.args[2]);
    const TensorIR& src = ctx.tensor(n.args[3]);
    if (self.rank() == 0 || src.rank() != self.rank() || index.rank() > 1) throw Unsupported("index_add of a 0-d tensor or through a multi-dim index");
    const int64_t dim = normalize_dim(n.args[1].as_int(), self.rank());
    for (int d = 0; d < self.rank(); ++d)
      if (d != dim && !compatible(src.sizes[d], self.sizes[d])) throw Unsupported("index_add: source and self differ in shape");
    const double alpha = n.args.size() > 4 && !n.args[4].is_none() ? n.args[4].as_double() : 1.0;
    const bool vector_index = index.rank() == 1;
    auto value = [src, alpha](const std::vector<Expr>& idx) {
      Expr v = cast(src.fn(idx), DType::F32);
      return alpha == 1.0 ? v : binary(ExprOp::Mul, v, const_of(alpha, DType::F32), DType::F32);
    };
    auto at = [index, dim, vector_index](const std::vector<Expr>& idx) {
      std::vector<Expr> to = idx;
      to[dim] = index.fn(vector_index ? std::vector<Expr>{idx[dim]} : std::vector<Expr>{});
      return to;
    };
    std::vector<int> origins = src.view ? std::vector<int>{} : src.origins;
    if (!index.view) origins.insert(origins.end(), index.origins.begin(), index.origins.end());
    return lower_scatter_add(ctx, n, self, src.sizes, value, at, origins);
  };
  // scatter_add(self, dim, index, src): out[.., index[i, j, ..], ..] += src[i, j, ..] over index's shape.
  t["aten.scatter_add.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& self = ctx.tensor(n.args[0]);
    const TensorIR& index = ctx.tensor(n.args[2]);
    const TensorIR& src = ctx.tensor(n.args[3]);
    if (self.rank() == 0 || index.rank() != self.rank() || src.rank() != self.rank()) throw Unsupported("scatter_add of a 0-d tensor");
    const int64_t dim = normalize_dim(n.args[1].as_int(), self.rank());
    for (int d = 0; d < self.rank(); ++d) {
      if (index.sizes[d].hint() > src.sizes[d].hint()) throw Unsupported("scatter_add: index larger than src");
      if (d != dim && index.sizes[d].hint() > self.sizes[d].hint()) throw Unsupported("scatter_add: index larger than self");
    }
    auto value = [src](const std::vector<Expr>& idx) { return cast(src.fn(idx), DType::F32); };
    auto at = [index, dim](const std::vector<Expr>& idx) {
      std::vector<Expr> to = idx;
      to[dim] = index.fn(idx);
      return to;
    };
    std::vector<int> origins = src.view ? std::vector<int>{} : src.origins;
    if (!index.view) origins.insert(origins.end(), index.origins.begin(), index.origins.end());
    return lower_scatter_add(ctx, n, self, index.sizes, value, at, origins);
  };
  t["aten.embedding.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& w = ctx.tensor(n.args[0]);
    const TensorIR& ids = ctx.tensor(n.args[1]);
    if (w.rank() != 2) throw Unsupported("embedding weight must be 2-d");
    const TensorType& out = ctx.out_type();
    Dim rows = w.sizes[0];
    return one(ctx.lazy(w.dtype, out.dims(), [w, ids, rows](const std::vector<Expr>& idx) {
      std::vector<Expr> lead(idx.begin(), idx.end() - 1);
      Expr row = checked_index(ids.fn(lead), rows, false);
      return w.fn({row, idx.back()});
    }, {&w, &ids}));
  };
  t["aten.index_select.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& self = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(n.args[1].as_int(), self.rank());
    const TensorIR& index = ctx.tensor(n.args[2]);
    Dim size = self.rank() ? self.sizes[dim] : Dim(1);
    bool zero_dim = self.rank() == 0;
    return one(ctx.lazy(self.dtype, ctx.out_type().dims(), [self, index, dim, size, zero_dim](const std::vector<Expr>& idx) {
      if (zero_dim) return self.fn({});
      std::vector<Expr> src = idx;
      src[dim] = checked_index(index.fn(index.sizes.empty() ? std::vector<Expr>{} : std::vector<Expr>{idx[dim]}), size, false);
      return self.fn(src);
    }, {&self, &index}));
  };
  t["aten.gather.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& self = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(n.args[1].as_int(), self.rank());
    const TensorIR& index = ctx.tensor(n.args[2]);
    if (index.rank() != self.rank()) throw Unsupported("gather with a 0-d operand");
    if (self.rank() == 0)  // the only valid index is 0
      return one(ctx.lazy(self.dtype, {}, [self](const std::vector<Expr>&) { return self.fn({}); }, {&self}));
    Dim size = self.sizes[dim];
    return one(ctx.lazy(self.dtype, index.sizes, [self, index, dim, size](const std::vector<Expr>& idx) {
      std::vector<Expr> src = idx;
      src[dim] = checked_index(index.fn(idx), size, false);
      return self.fn(src);
    }, {&self, &index}));
  };
  // index_put(self, indices, values, accumulate=True): out[.., i0[b], i1[b], ..] += values[.., b, ..]
  // over the indexed shape (self[indices]'s). One integer index arrives as index_add
  // (frontend/decompositions.py); several (x[i, j] += v) arrive here. Negative indices wrap.
  t["aten.index_put.default"] = [](LowerCtx& ctx, const Node& n) {
    if (n.args.size() < 4 || !n.args[3].is_number() || n.args[3].as_int() == 0)
      throw Unsupported("index_put without accumulation");
    const TensorIR& self = ctx.tensor(n.args[0]);
    const AdvancedIndex a = advanced_index(ctx, self, n.args[1].list, "index_put");
    const std::vector<int>& dims = a.dims;
    const std::vector<TensorIR>& indices = a.indices;
    const Dims& bshape = a.broadcast;
    const Dims& shape = a.shape;
    if (!n.args[2].is_tensor()) throw Unsupported("index_put of a number");
    const TensorIR& values = ctx.tensor(n.args[2]);
    const int first = dims.front(), last = dims.back();
    if (values.rank() > static_cast<int>(shape.size())) throw Unsupported("index_put: values of a higher rank");
    for (int d = 0; d < values.rank(); ++d)
      if (!(values.sizes[d] == 1) && !compatible(values.sizes[d], shape[shape.size() - values.rank() + d]))
        throw Unsupported("index_put: values that do not broadcast to the indexed shape");
    const size_t nb = bshape.size();
    const Dims sizes = self.sizes;
    auto value = [values](const std::vector<Expr>& idx) {
      return cast(values.fn(broadcast_index(idx, values.sizes)), DType::F32);
    };
    auto at = [indices, dims, first, last, nb, sizes](const std::vector<Expr>& idx) {
      std::vector<Expr> to(idx.begin(), idx.begin() + first);
      std::vector<Expr> b(idx.begin() + first, idx.begin() + first + nb);
      for (size_t k = 0; k < dims.size(); ++k) {
        Expr ix = cast(indices[k].fn(broadcast_index(b, indices[k].sizes)), DType::I64);
        to.push_back(where(cmp(ExprOp::Lt, ix, int_const(0)), add(ix, sizes[dims[k]].expr()), ix));
      }
      to.insert(to.end(), idx.begin() + first + nb, idx.end());
      return to;
    };
    std::vector<int> origins = values.view ? std::vector<int>{} : values.origins;
    for (const auto& ix : indices)
      if (!ix.view) origins.insert(origins.end(), ix.origins.begin(), ix.origins.end());
    return lower_scatter_add(ctx, n, self, shape, value, at, origins);
  };
  t["aten.scatter.value"] = [](LowerCtx& ctx, const Node& n) { return lower_scatter(ctx, n, false); };
  t["aten.scatter.src"] = [](LowerCtx& ctx, const Node& n) { return lower_scatter(ctx, n, true); };
  t["aten.index.Tensor"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& self = ctx.tensor(n.args[0]);
    const AdvancedIndex a = advanced_index(ctx, self, n.args[1].list, "index");
    const std::vector<int>& dims = a.dims;
    const std::vector<TensorIR>& indices = a.indices;
    const Dims& bshape = a.broadcast;
    const Dims& shape = a.shape;
    int first = dims.front();
    if (shape != ctx.out_type().dims()) throw Unsupported("index: unexpected result shape");
    size_t nb = bshape.size();
    Dims sizes = self.sizes;
    TensorIR r = ctx.lazy(self.dtype, shape, [self, indices, dims, first, nb, sizes](const std::vector<Expr>& idx) {
      std::vector<Expr> src(idx.begin(), idx.begin() + first);
      std::vector<Expr> b(idx.begin() + first, idx.begin() + first + nb);
      for (size_t k = 0; k < dims.size(); ++k)
        src.push_back(checked_index(indices[k].fn(broadcast_index(b, indices[k].sizes)), sizes[dims[k]], true));
      src.insert(src.end(), idx.begin() + first + nb, idx.end());
      return self.fn(src);
    }, {&self});
    for (const auto& ix : indices)
      if (!ix.view) r.origins.insert(r.origins.end(), ix.origins.begin(), ix.origins.end());
    return one(r);
  };
}

}  // namespace ember
