// Views and layout: view/reshape, permute, expand, squeeze/unsqueeze, slice,
// select, split, diagonal, repeat, as_strided, cat, constant_pad_nd, flip.
//
// A view of a value in memory stays a StridedView (affine indexing, and extern ops
// can receive it as a torch view with no copy). A view of a lazy value remaps its
// index function, reshapes included (lazy_reshape), unless the reshape would divide
// the innermost index: then, or when strides cannot express a reshape of memory, the
// input is realized first.
#include <algorithm>
#include <optional>

#include "lower/ops_common.h"
#include "lower/reshape.h"

namespace ember {

namespace {

std::vector<TensorIR> one(TensorIR t) { return {std::move(t)}; }

Dims infer_shape(Dims shape, const Dim& numel) {
  Dim known = 1;
  int64_t infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) infer = static_cast<int64_t>(i);
    else known *= shape[i];
  }
  if (infer >= 0) shape[infer] = known == 0 ? Dim(0) : floordiv(numel, known);
  return shape;
}

Dims non_unit(const Dims& v) {
  Dims out;
  for (const Dim& s : v)
    if (s != 1) out.push_back(s);
  return out;
}

TensorIR with_view(LowerCtx& ctx, const TensorIR& src, StridedView v) {
  TensorIR t = ctx.from_view(v);
  t.origins = src.origins;
  return t;
}

TensorIR reshape(LowerCtx& ctx, const TensorIR& in, const Dims& shape) {
  if (!in.view) {
    if (auto t = lazy_reshape(ctx, in, shape)) {
      t->reshaped_from = std::make_shared<const TensorIR>(in);
      return *t;
    }
  }
  if (in.view) {
    if (auto st = view_strides(in.sizes, in.view->strides, shape)) {
      StridedView v = *in.view;
      v.sizes = shape;
      v.strides = *st;
      return with_view(ctx, in, v);
    }
  } else if (non_unit(in.sizes) == non_unit(shape)) {
    // Only unit dims move: remap the index without touching memory.
    Dims from = in.sizes;
    return ctx.lazy(in.dtype, shape, [in, from, shape](const std::vector<Expr>& idx) {
      std::vector<Expr> src_idx(from.size(), int_const(0));
      size_t k = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1) continue;
        while (from[k] == 1) ++k;
        src_idx[k++] = idx[d];
      }
      return in.fn(src_idx);
    }, {&in});
  }
  // Realize in eager's layout when that keeps the reshape a view (no copy later).
  if (!in.preferred_strides.empty()) {
    if (auto st = view_strides(in.sizes, in.preferred_strides, shape)) {
      TensorIR s = ctx.realize(in, in.preferred_strides);
      StridedView v = *s.view;
      v.sizes = shape;
      v.strides = *st;
      return with_view(ctx, in, v);
    }
  }
  TensorIR s = ctx.realize(in);
  StridedView v = *s.view;
  v.sizes = shape;
  v.strides = contiguous_strides(shape);
  return with_view(ctx, in, v);
}

// A view defined by a per-dim affine map: new dim d reads old dim src[d]
// (or none) at start[d] + step[d] * i.
struct DimMap {
  int src = -1;  // -1: a new (broadcast or unit) dim
  Dim start = 0;
  int64_t step = 1;
};

TensorIR remap(LowerCtx& ctx, const TensorIR& in, const Dims& shape, const std::vector<DimMap>& map,
               const std::vector<std::pair<int, Dim>>& fixed = {}) {
  // fixed: old dims pinned to an index (select).
  if (in.view) {
    StridedView v = *in.view;
    StridedView out{v.buffer, v.dtype, shape, Dims(shape.size(), Dim(0)), v.offset};
    for (const auto& [d, i] : fixed) out.offset += i * v.strides[d];
    for (size_t d = 0; d < shape.size(); ++d) {
      if (map[d].src < 0) continue;
      out.offset += map[d].start * v.strides[map[d].src];
      out.strides[d] = Dim(map[d].step) * v.strides[map[d].src];
    }
    // Symbolic strides are positive, so their sign is their hint's.
    bool negative = std::any_of(out.strides.begin(), out.strides.end(), [](const Dim& s) { return s.hint() < 0; });
    if (!negative) return with_view(ctx, in, out);
  }
  size_t old_rank = in.sizes.size();
  return ctx.lazy(in.dtype, shape, [in, map, fixed, old_rank](const std::vector<Expr>& idx) {
    std::vector<Expr> src_idx(old_rank, int_const(0));
    for (const auto& [d, i] : fixed) src_idx[d] = i.expr();
    for (size_t d = 0; d < map.size(); ++d) {
      if (map[d].src < 0) continue;
      src_idx[map[d].src] = add(mul(idx[d], map[d].step), map[d].start.expr());
    }
    return in.fn(src_idx);
  }, {&in});
}

TensorIR identity_remap(LowerCtx& ctx, const TensorIR& in, const std::vector<int>& perm) {
  Dims shape;
  std::vector<DimMap> map;
  for (int p : perm) {
    shape.push_back(in.sizes[p]);
    map.push_back({p, 0, 1});
  }
  return remap(ctx, in, shape, map);
}

std::vector<TensorIR> slice(LowerCtx& ctx, const TensorIR& in, int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t size = in.sizes[dim].hint();
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  int64_t len = step > 0 ? (end - start + step - 1) / step : 0;
  Dims shape = in.sizes;
  shape[dim] = len;
  std::vector<DimMap> map;
  for (size_t d = 0; d < in.sizes.size(); ++d) map.push_back({static_cast<int>(d), 0, 1});
  map[dim] = {static_cast<int>(dim), start, step};
  return one(remap(ctx, in, shape, map));
}

// A slice where the sliced size or the bounds are symbolic: the result's length is
// the graph's (Dynamo computed it), and the start is clamped as ATen clamps it.
std::vector<TensorIR> symbolic_slice(LowerCtx& ctx, const TensorIR& in, int64_t dim, const Dim& start, const Dim& len,
                                     int64_t step) {
  // A non-empty result starts inside the tensor: a start >= 0 needs no clamp.
  const Dim first = slice_start(start, in.sizes[dim]);
  if (step <= 0) throw Unsupported("slice with a non-positive step");
  Dims shape = in.sizes;
  shape[dim] = len;
  std::vector<DimMap> map;
  for (size_t d = 0; d < in.sizes.size(); ++d) map.push_back({static_cast<int>(d), 0, 1});
  map[dim] = {static_cast<int>(dim), first, step};
  return one(remap(ctx, in, shape, map));
}

int64_t arg_int_or(const Node& n, size_t i, int64_t dflt) {
  return n.args.size() > i && !n.args[i].is_none() ? n.args[i].as_int() : dflt;
}

// Strides that lay out every element exactly once from offset 0 (a permutation
// of a contiguous layout).
bool dense_layout(const Dims& sizes, const Dims& strides) {
  if (sizes.size() != strides.size()) return false;
  std::vector<size_t> order;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) order.push_back(d);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a].hint() < strides[b].hint(); });
  Dim expect = 1;
  for (size_t d : order) {
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

}  // namespace

// Ops whose eager result is a view of another tensor's storage.
bool is_view_op(const std::string& op) {
  static const char* views[] = {"aten.view.", "aten._unsafe_view.", "aten.reshape.", "aten.alias.", "aten.detach.",
                                "aten.permute.", "aten.t.", "aten.transpose.", "aten.expand.", "aten.unsqueeze.",
                                "aten.squeeze.", "aten.slice.", "aten.select.", "aten.split", "aten.unbind.",
                                "aten.diagonal.", "aten.as_strided.", "aten.unfold.", "aten.narrow."};
  for (const char* v : views)
    if (op.rfind(v, 0) == 0) return true;
  return false;
}

void register_view_ops(LoweringTable& t) {
  auto view = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    return one(reshape(ctx, in, infer_shape(n.args[1].as_dims(), in.numel())));
  };
  t["aten.view.default"] = view;
  t["aten._unsafe_view.default"] = view;
  t["aten.reshape.default"] = view;
  auto alias = [](LowerCtx& ctx, const Node& n) { return one(ctx.tensor(n.args[0])); };
  t["aten.alias.default"] = alias;
  t["aten.detach.default"] = alias;
  t["aten.permute.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    std::vector<int> perm;
    for (int64_t d : n.args[1].as_ints()) perm.push_back(static_cast<int>(normalize_dim(d, in.rank())));
    return one(identity_remap(ctx, in, perm));
  };
  t["aten.t.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    std::vector<int> perm = in.rank() == 2 ? std::vector<int>{1, 0} : std::vector<int>{0};
    if (in.rank() == 0) perm.clear();
    return one(identity_remap(ctx, in, perm));
  };
  t["aten.transpose.int"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    std::vector<int> perm;
    for (int d = 0; d < in.rank(); ++d) perm.push_back(d);
    if (in.rank() > 0) std::swap(perm[normalize_dim(n.args[1].as_int(), in.rank())], perm[normalize_dim(n.args[2].as_int(), in.rank())]);
    return one(identity_remap(ctx, in, perm));
  };
  t["aten.expand.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    Dims shape = n.args[1].as_dims();
    size_t lead = shape.size() - in.sizes.size();
    std::vector<DimMap> map(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (d < lead) continue;
      const Dim& old = in.sizes[d - lead];
      if (shape[d] == -1) shape[d] = old;
      if (old == shape[d]) map[d] = {static_cast<int>(d - lead), 0, 1};
    }
    return one(remap(ctx, in, shape, map));
  };
  t["aten.unsqueeze.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    int64_t dim = n.args[1].as_int();
    if (dim < 0) dim += in.rank() + 1;
    Dims shape;
    std::vector<DimMap> map;
    for (int64_t d = 0; d <= in.rank(); ++d) {
      if (d == dim) {
        shape.push_back(1);
        map.push_back({});
      }
      if (d < in.rank()) {
        shape.push_back(in.sizes[d]);
        map.push_back({static_cast<int>(d), 0, 1});
      }
    }
    return one(remap(ctx, in, shape, map));
  };
  auto squeeze = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    std::vector<bool> drop(in.sizes.size(), false);
    if (n.args.size() < 2 || n.args[1].is_none()) {
      for (size_t d = 0; d < in.sizes.size(); ++d) drop[d] = in.sizes[d] == 1;
    } else {
      for (int64_t d : n.args[1].as_ints()) {
        if (in.rank() == 0) continue;
        int64_t nd = normalize_dim(d, in.rank());
        drop[nd] = in.sizes[nd] == 1;
      }
    }
    Dims shape;
    std::vector<DimMap> map;
    for (size_t d = 0; d < in.sizes.size(); ++d) {
      if (drop[d]) continue;
      shape.push_back(in.sizes[d]);
      map.push_back({static_cast<int>(d), 0, 1});
    }
    return one(remap(ctx, in, shape, map));
  };
  t["aten.squeeze.default"] = squeeze;
  t["aten.squeeze.dim"] = squeeze;
  t["aten.squeeze.dims"] = squeeze;
  t["aten.slice.Tensor"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(arg_int_or(n, 1, 0), in.rank());
    Dim start = n.args.size() > 2 && !n.args[2].is_none() ? n.args[2].as_dim() : Dim(0);
    bool symbolic_end = n.args.size() > 3 && n.args[3].kind == Arg::Kind::Int && n.args[3].sym;
    int64_t step = arg_int_or(n, 4, 1);
    if (!in.sizes[dim].is_static() || !start.is_static() || symbolic_end)
      return symbolic_slice(ctx, in, dim, start, ctx.out_type().dims().at(dim), step);
    return slice(ctx, in, dim, start.hint(), arg_int_or(n, 3, INT64_MAX), step);
  };
  t["aten.select.int"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(n.args[1].as_int(), in.rank());
    int64_t index = n.args[2].as_int();
    Dim at = index;
    if (in.sizes[dim].is_static()) {
      if (index < 0) index += in.sizes[dim].hint();
      if (index < 0 || index >= in.sizes[dim].hint()) throw Unsupported("select index out of range");
      at = index;
    } else if (index < 0) {
      at = in.sizes[dim] + Dim(index);  // Dynamo's guards keep it in range
    }
    Dims shape;
    std::vector<DimMap> map;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (d == dim) continue;
      shape.push_back(in.sizes[d]);
      map.push_back({static_cast<int>(d), 0, 1});
    }
    return one(remap(ctx, in, shape, map, {{static_cast<int>(dim), at}}));
  };
  auto split = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(arg_int_or(n, 2, 0), in.rank());
    Dims sizes;
    if (n.op == "aten.split.Tensor") {
      int64_t chunk = n.args[1].as_int();
      if (!in.sizes[dim].is_static()) throw Unsupported("split of a symbolic dim into chunks");
      const int64_t size = in.sizes[dim].hint();
      for (int64_t s = 0; s < size; s += chunk) sizes.push_back(std::min(chunk, size - s));
      if (sizes.empty()) sizes.push_back(0);
    } else {
      sizes = n.args[1].as_dims();
    }
    std::vector<TensorIR> outs;
    Dim start = 0;
    for (const Dim& s : sizes) {
      if (start.is_static() && s.is_static() && in.sizes[dim].is_static())
        outs.push_back(slice(ctx, in, dim, start.hint(), start.hint() + s.hint(), 1)[0]);
      else
        outs.push_back(symbolic_slice(ctx, in, dim, start, s, 1)[0]);
      start += s;
    }
    return outs;
  };
  t["aten.split.Tensor"] = split;
  t["aten.split_with_sizes.default"] = split;
  t["aten.unbind.int"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    int64_t dim = normalize_dim(arg_int_or(n, 1, 0), in.rank());
    std::vector<TensorIR> outs;
    if (!in.sizes[dim].is_static()) throw Unsupported("unbind of a symbolic dim");
    for (int64_t i = 0; i < in.sizes[dim].hint(); ++i) {
      Dims shape;
      std::vector<DimMap> map;
      for (int64_t d = 0; d < in.rank(); ++d) {
        if (d == dim) continue;
        shape.push_back(in.sizes[d]);
        map.push_back({static_cast<int>(d), 0, 1});
      }
      outs.push_back(remap(ctx, in, shape, map, {{static_cast<int>(dim), Dim(i)}}));
    }
    return outs;
  };
  t["aten.flip.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    std::vector<DimMap> map;
    for (int64_t d = 0; d < in.rank(); ++d) map.push_back({static_cast<int>(d), 0, 1});
    for (int64_t d : n.args[1].as_ints()) {
      int64_t nd = normalize_dim(d, in.rank());
      if (nd < in.rank()) map[nd] = {static_cast<int>(nd), in.sizes[nd] - 1, -1};  // a 0-d flip is the identity
    }
    return one(remap(ctx, in, in.sizes, map));
  };
  t["aten.diagonal.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static(ctx, n);
    const TensorIR& in = ctx.tensor(n.args[0]);
    int64_t offset = arg_int_or(n, 1, 0);
    int64_t d1 = normalize_dim(arg_int_or(n, 2, 0), in.rank());
    int64_t d2 = normalize_dim(arg_int_or(n, 3, 1), in.rank());
    if (d1 == d2) throw Unsupported("diagonal with equal dims");
    // Diagonal element k sits at (k + r1, k + r2).
    int64_t r1 = offset >= 0 ? 0 : -offset, r2 = offset >= 0 ? offset : 0;
    int64_t len = std::max<int64_t>(std::min(in.sizes[d1].hint() - r1, in.sizes[d2].hint() - r2), 0);
    Dims shape;
    std::vector<int> keep;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (d == d1 || d == d2) continue;
      shape.push_back(in.sizes[d]);
      keep.push_back(static_cast<int>(d));
    }
    shape.push_back(len);
    if (in.view) {
      const StridedView& v = *in.view;
      StridedView out{v.buffer, v.dtype, shape, {}, v.offset};
      for (int d : keep) out.strides.push_back(v.strides[d]);
      out.strides.push_back(v.strides[d1] + v.strides[d2]);
      if (len > 0) out.offset += Dim(r1) * v.strides[d1] + Dim(r2) * v.strides[d2];
      return one(with_view(ctx, in, out));
    }
    int64_t rank = in.rank();
    return one(ctx.lazy(in.dtype, shape, [in, keep, d1, d2, r1, r2, rank](const std::vector<Expr>& idx) {
      std::vector<Expr> src(rank);
      for (size_t k = 0; k < keep.size(); ++k) src[keep[k]] = idx[k];
      src[d1] = add(idx.back(), r1);
      src[d2] = add(idx.back(), r2);
      return in.fn(src);
    }, {&in}));
  };
  t["aten.repeat.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    // A repeat count may be symbolic (BLOOM repeats its ALiBi slopes batch-size times): the
    // result's sizes are products of Dims, and the index into the input is a Mod either way.
    Dims reps = n.args[1].as_dims();
    if (reps.size() < in.sizes.size()) throw Unsupported("repeat with fewer repeats than dims");
    size_t lead = reps.size() - in.sizes.size();
    Dims shape(reps.size());
    for (size_t d = 0; d < reps.size(); ++d) shape[d] = reps[d] * (d < lead ? Dim(1) : in.sizes[d - lead]);
    Dims from = in.sizes;
    return one(ctx.lazy(in.dtype, shape, [in, from, lead](const std::vector<Expr>& idx) {
      std::vector<Expr> src;
      for (size_t d = 0; d < from.size(); ++d) {
        Expr i = idx[d + lead];
        src.push_back(from[d] == 1 ? int_const(0) : binary(ExprOp::Mod, i, from[d].expr(), DType::I64));
      }
      return in.fn(src);
    }, {&in}));
  };
  t["aten.as_strided.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static(ctx, n);
    const TensorIR& in = ctx.tensor(n.args[0]);
    // Storage offsets are relative to the storage, which ember knows for buffers
    // it allocated (computed or extern results start at offset 0) and for lazy
    // values whose eager tensor owns its storage: those are realized in eager's
    // layout first. A graph input's storage offset is not known here.
    TensorIR base = in;
    if (!in.view) {
      const Node& producer = ctx.graph().nodes.at(n.args[0].ref.node);
      const TensorType& t = producer.outputs.at(n.args[0].ref.index);
      if (is_view_op(producer.op) || !dense_layout(t.dims(), t.stride_dims()))
        throw Unsupported("as_strided of a lazy view");
      base = ctx.realize(in, t.stride_dims());
    } else if (ctx.program().buffers[in.view->buffer].kind == Buffer::Kind::Input) {
      throw Unsupported("as_strided of a graph input");
    }
    StridedView v = *base.view;
    v.sizes = to_dims(n.args[1].as_ints());
    v.strides = to_dims(n.args[2].as_ints());
    v.offset = n.args.size() > 3 && !n.args[3].is_none() ? Dim(n.args[3].as_int()) : v.offset;
    return one(with_view(ctx, in, v));
  };

  t["aten.cat.default"] = [](LowerCtx& ctx, const Node& n) {
    std::vector<TensorIR> parts;
    for (const Arg& a : n.args[0].list) {
      const TensorIR& p = ctx.tensor(a);
      if (p.sizes.size() == 1 && p.sizes[0] == 0 && ctx.out_type().sizes.size() != 1) continue;  // legacy empty
      parts.push_back(p);
    }
    const TensorType& out = ctx.out_type();
    int64_t dim = normalize_dim(arg_int_or(n, 1, 0), static_cast<int64_t>(out.sizes.size()));
    DType dt = out.dtype;
    Dims starts;
    Dim acc = 0;
    std::vector<TensorIR> kept;
    for (const auto& p : parts) {
      if (p.sizes[dim] == 0) continue;
      starts.push_back(acc);
      acc += p.sizes[dim];
      kept.push_back(p);
    }
    if (acc != out.dims()[dim] || kept.empty()) throw Unsupported("cat: unexpected sizes");
    std::vector<const TensorIR*> ins;
    for (const auto& p : kept) ins.push_back(&p);
    TensorIR r = ctx.lazy(dt, out.dims(), [kept, starts, dim, dt](const std::vector<Expr>& idx) {
      // Part k covers [starts[k], starts[k+1]); pick it by comparing the cat-dim index.
      auto part = [&](size_t k) {
        std::vector<Expr> local = idx;
        local[dim] = add(idx[dim], (Dim(0) - starts[k]).expr());
        return cast(kept[k].fn(local), dt);
      };
      Expr v = part(kept.size() - 1);
      for (size_t k = kept.size() - 1; k-- > 0;)
        v = where(cmp(ExprOp::Lt, idx[dim], starts[k + 1].expr()), part(k), v);
      return v;
    }, {});
    for (const auto& p : kept)
      if (!p.view) r.origins.insert(r.origins.end(), p.origins.begin(), p.origins.end());
    return one(r);
  };

  t["aten.constant_pad_nd.default"] = [](LowerCtx& ctx, const Node& n) {
    const TensorIR& in = ctx.tensor(n.args[0]);
    std::vector<int64_t> pad = n.args[1].as_ints();
    double value = n.args.size() > 2 && !n.args[2].is_none() ? n.args[2].as_double() : 0.0;
    const TensorType& out = ctx.out_type();
    int64_t rank = in.rank();
    std::vector<int64_t> before(rank, 0);
    for (size_t k = 0; k * 2 < pad.size(); ++k) before[rank - 1 - k] = pad[2 * k];
    DType dt = out.dtype;
    Dims in_sizes = in.sizes, out_sizes = out.dims();
    return one(ctx.lazy(dt, out_sizes, [in, before, in_sizes, out_sizes, value, dt](const std::vector<Expr>& idx) {
      std::vector<Expr> src(idx.size());
      Expr inside;
      auto both = [&](Expr cond) { inside = inside ? binary(ExprOp::LogicalAnd, inside, cond, DType::Bool) : cond; };
      for (size_t d = 0; d < idx.size(); ++d) {
        src[d] = add(idx[d], -before[d]);
        Dim after = out_sizes[d] - in_sizes[d] - Dim(before[d]);
        if (before[d] > 0) both(cmp(ExprOp::Ge, src[d], int_const(0)));
        if (!after.is_static() || after.hint() > 0) both(cmp(ExprOp::Lt, src[d], in_sizes[d].expr()));
      }
      Expr x = cast(in.fn(src), dt);
      return inside ? where(inside, x, const_of(value, dt)) : x;
    }, {&in}));
  };
}

}  // namespace ember
