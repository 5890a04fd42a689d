// Windowed reductions: max_pool2d (with indices), avg_pool2d, adaptive_avg_pool2d;
// and max_pool2d's backward, a gather over the windows that may hold an input element.
//
// A pool is a reduction over a virtual tensor of shape [..., OH, OW, KH, KW] whose
// elements read the padded input; out-of-window positions read the reduction's
// identity (-inf for max, 0 for sum), guarded so nothing outside the input is loaded.
#include <cmath>
#include <optional>
#include <unordered_set>

#include "ir/affine.h"
#include "ir/monotone.h"
#include "lower/ops_common.h"

namespace ember {

namespace {

struct Window {
  int64_t k[2], s[2], p[2], d[2];
};

Window window_args(const Node& n, size_t first, bool with_dilation) {
  auto pair = [](const Arg& a, int64_t dflt) {
    std::vector<int64_t> v = a.is_none() ? std::vector<int64_t>{} : a.as_ints();
    if (v.empty()) return std::vector<int64_t>{dflt, dflt};
    if (v.size() == 1) return std::vector<int64_t>{v[0], v[0]};
    return v;
  };
  Window w;
  auto k = pair(n.args.at(first), 1);
  auto s = n.args.size() > first + 1 ? pair(n.args[first + 1], 0) : std::vector<int64_t>{0, 0};
  auto p = n.args.size() > first + 2 ? pair(n.args[first + 2], 0) : std::vector<int64_t>{0, 0};
  auto d = with_dilation && n.args.size() > first + 3 ? pair(n.args[first + 3], 1) : std::vector<int64_t>{1, 1};
  for (int i = 0; i < 2; ++i) {
    w.k[i] = k[i];
    w.s[i] = s[i] == 0 ? k[i] : s[i];
    w.p[i] = p[i];
    w.d[i] = d[i];
  }
  return w;
}

// The [..., OH, OW, KH, KW] virtual tensor of input positions, `fill` outside the input.
TensorIR windows(LowerCtx& ctx, const TensorIR& in, const std::vector<int64_t>& out_hw, const Window& w, double fill, DType t) {
  Dims shape(in.sizes.begin(), in.sizes.end() - 2);
  int64_t H = in.sizes[in.rank() - 2].hint(), W = in.sizes[in.rank() - 1].hint();
  shape.push_back(out_hw[0]);
  shape.push_back(out_hw[1]);
  shape.push_back(w.k[0]);
  shape.push_back(w.k[1]);
  return ctx.lazy(t, shape, [in, w, H, W, fill, t](const std::vector<Expr>& idx) {
    size_t lead = idx.size() - 4;
    std::vector<Expr> src(idx.begin(), idx.begin() + lead);
    Expr ih = add(add(mul(idx[lead], w.s[0]), mul(idx[lead + 2], w.d[0])), -w.p[0]);
    Expr iw = add(add(mul(idx[lead + 1], w.s[1]), mul(idx[lead + 3], w.d[1])), -w.p[1]);
    src.push_back(ih);
    src.push_back(iw);
    Expr x = cast(in.fn(src), t);
    Expr ok;
    auto both = [&](Expr c) { ok = ok ? binary(ExprOp::LogicalAnd, ok, c, DType::Bool) : c; };
    both(cmp(ExprOp::Ge, ih, int_const(0)));
    both(cmp(ExprOp::Lt, ih, int_const(H)));
    both(cmp(ExprOp::Ge, iw, int_const(0)));
    both(cmp(ExprOp::Lt, iw, int_const(W)));
    return where(ok, x, const_of(fill, t));
  }, {&in});
}

// Windows up to this many elements are unrolled into a pointwise op over the
// output (vectorized along the output width) instead of a reduction loop.
constexpr int64_t kUnrollWindow = 25;

std::vector<int64_t> last2(const std::vector<int64_t>& v) { return {v[v.size() - 2], v[v.size() - 1]}; }

// Var ids far above any the program allocates: a lazy value's body evaluated at them is
// only inspected (or rewritten before it is used).
constexpr int kPlaceholderVar = 1 << 28;

// `t`'s body at the placeholder index (var kPlaceholderVar + d for dim d).
Expr body_at_placeholders(const TensorIR& t) {
  std::vector<Expr> idx;
  for (size_t d = 0; d < t.sizes.size(); ++d) idx.push_back(var(kPlaceholderVar + static_cast<int>(d)));
  return t.fn(idx);
}

// Whether every one of `out` windows along dim `d` holds a position inside [0, n).
bool reads_input(const Window& w, int d, int64_t n, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    bool any = false;
    for (int64_t k = 0; k < w.k[d] && !any; ++k) {
      const int64_t i = o * w.s[d] - w.p[d] + k * w.d[d];
      any = i >= 0 && i < n;
    }
    if (!any) return false;
  }
  return true;
}

// The input plane a pool reads ([H, W]), its output plane, and the dims along which a
// window position outside the input is clamped into it instead of tested. A max (or a
// min) is unchanged by repeating one of its operands, and along a dim of contiguous
// windows (dilation 1) that all hold an input position, the clamped position is in the
// same window: one index clamp per thread instead of a select per element, and the
// load needs no guard. Not for an argmax (the position is the answer), nor along the
// layout's innermost dim (the clamp would make a vector load a gather).
struct Plane {
  int64_t in[2], out[2];
  bool full[2] = {false, false};  // every window along the dim holds an input position
  bool clamp[2] = {false, false};
};

Plane plane_of(const Window& w, int64_t H, int64_t W, const std::vector<int64_t>& out_hw, bool clamp_h, bool clamp_w) {
  Plane pl{{H, W}, {out_hw[0], out_hw[1]}};
  const bool want[2] = {clamp_h, clamp_w};
  for (int d = 0; d < 2; ++d) {
    pl.full[d] = reads_input(w, d, pl.in[d], pl.out[d]);
    pl.clamp[d] = want[d] && w.d[d] == 1 && pl.full[d];
  }
  return pl;
}

// The input index window position (kh, kw) of output index idx reads, and whether it
// lies inside the input (null: always).
struct WindowRead {
  std::vector<Expr> src;
  Expr inside;
};

WindowRead window_read(const Window& w, const Plane& pl, const std::vector<Expr>& idx, int64_t kh, int64_t kw) {
  size_t lead = idx.size() - 2;
  WindowRead r{std::vector<Expr>(idx.begin(), idx.begin() + lead), nullptr};
  const int64_t k[2] = {kh, kw};
  for (int d = 0; d < 2; ++d) {
    const int64_t shift = k[d] * w.d[d] - w.p[d];
    Expr i = add(mul(idx[lead + d], w.s[d]), shift);
    const bool below = shift < 0, above = (pl.out[d] - 1) * w.s[d] + shift >= pl.in[d];
    if (pl.clamp[d]) {
      if (below) i = binary(ExprOp::Max, i, int_const(0), DType::I64);
      if (above) i = binary(ExprOp::Min, i, int_const(pl.in[d] - 1), DType::I64);
    } else {
      auto both = [&](Expr c) { r.inside = r.inside ? binary(ExprOp::LogicalAnd, r.inside, c, DType::Bool) : c; };
      if (below) both(cmp(ExprOp::Ge, i, int_const(0)));
      if (above) both(cmp(ExprOp::Lt, i, int_const(pl.in[d])));
    }
    r.src.push_back(i);
  }
  return r;
}

// The value of window position (kh, kw) for output index idx, `fill` outside the input.
Expr window_value(const TensorIR& in, const Window& w, const Plane& pl, const std::vector<Expr>& idx, int64_t kh,
                  int64_t kw, double fill, DType t) {
  WindowRead r = window_read(w, pl, idx, kh, kw);
  Expr v = cast(in.fn(r.src), t);
  return r.inside ? where(r.inside, v, const_of(fill, t)) : v;
}

// An unrolled max-pool of a monotone function of one load (BatchNorm + ReLU recomputed
// in the window reads of a convolution's output): the window's largest and smallest raw
// values, then f of each, max(f(max x), f(min x)) -- two evaluations of f per output
// instead of one per window element (ir/monotone.h). Exact, rounding being monotone too
// and NaN propagating through Max, Min and f, but for two cases: a zero's sign may
// differ from eager's (which of equal values a max keeps), and the exception
// monotone.h names (an infinite per-channel factor meeting an exact zero) turns a NaN
// of eager's into an infinity; it needs an infinite BatchNorm weight or a variance of
// exactly -eps. nullopt when `in` is not such a function or f is only casts (a plain
// load: nothing to save). (Evaluating f once, at the extreme the sign of its factors
// picks, measured no faster on ResNet's stem: the kernel is not bound by f.)
std::optional<TensorIR> max_pool_through_monotone(LowerCtx& ctx, const TensorIR& in, const Window& w, const Plane& pl,
                                                  DType ct, DType dt) {
  if (!is_float(ct) || in.view) return std::nullopt;
  const int base = kPlaceholderVar;
  const int rank = static_cast<int>(in.rank());
  const Expr body = body_at_placeholders(in);
  std::optional<MonotoneLoad> m = monotone_load(body, {base + rank - 2, base + rank - 1});
  if (!m || !m->arithmetic) return std::nullopt;
  const Expr x = m->load;
  const bool every_window_reads_input = pl.full[0] && pl.full[1];
  return ctx.lazy(dt, ctx.out_type(0).dims(), [body, x, w, pl, ct, dt, base, every_window_reads_input](const std::vector<Expr>& idx) {
    const size_t lead = idx.size() - 2;
    std::unordered_map<int, Expr> outer;  // the batch and channel placeholders
    for (size_t d = 0; d < lead; ++d) outer[base + static_cast<int>(d)] = idx[d];
    Expr hi, lo;
    for (int64_t kh = 0; kh < w.k[0]; ++kh)
      for (int64_t kw = 0; kw < w.k[1]; ++kw) {
        WindowRead r = window_read(w, pl, idx, kh, kw);
        std::unordered_map<int, Expr> pos = outer;
        pos[base + static_cast<int>(lead)] = r.src[lead];
        pos[base + static_cast<int>(lead) + 1] = r.src[lead + 1];
        Expr v = cast(substitute(x, pos), ct);
        Expr vhi = r.inside ? where(r.inside, v, const_of(-INFINITY, ct)) : v;
        Expr vlo = r.inside ? where(r.inside, v, const_of(INFINITY, ct)) : v;
        hi = hi ? binary(ExprOp::Max, hi, vhi, ct) : vhi;
        lo = lo ? binary(ExprOp::Min, lo, vlo, ct) : vlo;
      }
    auto f = [&](const Expr& v) { return cast(substitute(replace(body, x.get(), cast(v, x->dtype)), outer), ct); };
    Expr best = binary(ExprOp::Max, f(hi), f(lo), ct);
    // A window wholly in the padding (lo = +inf > hi = -inf) is -inf, as in eager. Most
    // geometries have none, and the guard would put f in a Where branch (the CUDA path
    // hoists no per-channel value out of a branch: lane_invariant.h).
    if (!every_window_reads_input) best = where(cmp(ExprOp::Gt, lo, hi), const_of(-INFINITY, ct), best);
    return cast(best, dt);
  }, {&in});
}

// Drops the two trailing unit dims of a keepdim window reduction.
TensorIR drop_window_dims(LowerCtx& ctx, const TensorIR& r) {
  StridedView v = *r.view;
  v.sizes.resize(v.sizes.size() - 2);
  v.strides.resize(v.strides.size() - 2);
  TensorIR out = ctx.from_view(v);
  out.origins = r.origins;
  return out;
}

double lowest_value(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::U8: return 0;
    case DType::I8: return -128;
    case DType::I16: return -32768;
    case DType::I32: return -2147483648.0;
    default: return -9223372036854775808.0;  // i64: exactly representable as a double
  }
}

// The output positions along one dim whose window may contain input position `i`:
// o with o*s - p <= i <= o*s - p + (k-1)*d, i.e. o from ceil((i + p - (k-1)*d) / s),
// at most (k-1)*d/s + 1 of them. A candidate is real if it lies in [0, out) and
// o*s <= i + p; its load is clamped into range so that it never reads outside.
struct Candidates {
  int64_t count;
  Expr first;  // the first candidate, possibly out of range
};

Candidates window_candidates(Expr i, const Window& w, int dim) {
  int64_t reach = (w.k[dim] - 1) * w.d[dim];
  Expr lo = add(i, w.p[dim] - reach);
  Expr first = binary(ExprOp::FloorDiv, add(lo, w.s[dim] - 1), int_const(w.s[dim]), DType::I64);
  return {reach / w.s[dim] + 1, first};
}

// Whether every load of `t`'s body steps by at most one element along `dim`, the dim its
// stored layout makes innermost (the last; channels in a channels-last graph). A lazy
// value that reads a transposed layout (BatchNorm + ReLU of a channels-last convolution
// output, pooled in NCHW on the CPU) would make each of the window's reads a strided
// gather, recomputed per read and scalar (GCC does not vectorize large constant
// strides): such an input is better realized once, contiguously. One that reads
// along the layout (the same value in a channels-last CUDA graph) is recomputed per
// window read instead: a few flops against a round trip of the whole activation.
bool reads_contiguously_along(const TensorIR& t, size_t dim) {
  if (t.view || t.sizes.empty()) return true;
  const int inner = kPlaceholderVar + static_cast<int>(dim);
  const Expr body = body_at_placeholders(t);
  std::vector<const ExprNode*> stack{body.get()};
  std::unordered_set<const ExprNode*> seen;
  while (!stack.empty()) {
    const ExprNode* e = stack.back();
    stack.pop_back();
    if (!seen.insert(e).second) continue;
    if (e->op == ExprOp::Load) {
      std::optional<AffineForm> f = affine_form(e->args[0]);
      if (!f) return false;
      auto it = f->coef.find(inner);
      if (it != f->coef.end() && it->second != 1) return false;
    }
    for (const Expr& a : e->args) stack.push_back(a.get());
  }
  return true;
}

// Pooling reads the window geometry at compile time: the two spatial dims of every
// tensor argument and result must be static; batch and channels may be symbolic.
void require_static_spatial(const LowerCtx& ctx, const Node& n) {
  auto check = [](const Dims& d) {
    for (size_t i = d.size() >= 2 ? d.size() - 2 : 0; i < d.size(); ++i)
      if (!d[i].is_static()) throw Unsupported("pooling over symbolic spatial sizes");
  };
  for (const auto& a : n.args)
    if (a.is_tensor()) check(ctx.value(a.ref).sizes);
  for (const auto& t : n.outputs)
    if (t.is_tensor) check(t.dims());
}

}  // namespace

void register_pooling_ops(LoweringTable& t) {
  t["aten.max_pool2d_with_indices.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static_spatial(ctx, n);
    const TensorIR& arg = ctx.tensor(n.args[0]);
    // Stored in the value's preferred layout: NCHW on the CPU; channels-last in CUDA conv
    // graphs (LowerOptions::channels_last_activations), where a contiguous copy would transpose.
    const size_t inner = ctx.channels_last() && arg.rank() == 4 ? 1 : arg.sizes.size() - 1;
    const TensorIR in = arg.sizes.empty() || reads_contiguously_along(arg, inner) ? arg : ctx.stored(arg);
    if (in.rank() < 3) throw Unsupported("max_pool2d input rank");
    Window w = window_args(n, 1, true);
    DType dt = in.dtype;
    DType ct = compute_type(dt);
    std::vector<int64_t> out_hw = last2(ctx.out_type(0).sizes);
    // Padding reads the lowest value: -inf, or the integer type's minimum.
    double lowest = is_float(ct) ? -INFINITY : lowest_value(ct);
    TensorIR win = windows(ctx, in, out_hw, w, lowest, ct);
    int64_t r = win.rank();
    int64_t H = in.sizes[in.rank() - 2].hint();
    const int64_t Wd = in.sizes[in.rank() - 1].hint();
    const size_t rank = in.rank();
    // With the indices read too (training), the values test their window positions as
    // the argmax does, so that both read the same words.
    const bool clamp = !ctx.output_used(1);
    // The layout's innermost dim: a stored input's unit stride, else where `inner` says
    // its lazy value is stored.
    size_t innermost = inner;
    if (in.view)
      for (size_t d = 0; d < rank; ++d)
        if (in.view->strides[d].is_static() && in.view->strides[d].hint() == 1 && in.sizes[d].hint() > 1) innermost = d;
    const Plane clamped = plane_of(w, H, Wd, out_hw, clamp && innermost != rank - 2, clamp && innermost != rank - 1);
    const Plane tested = plane_of(w, H, Wd, out_hw, false, false);
    TensorIR values;
    std::optional<TensorIR> monotone;
    if (w.k[0] * w.k[1] <= kUnrollWindow) monotone = max_pool_through_monotone(ctx, in, w, clamped, ct, dt);
    if (monotone) {
      values = *monotone;
    } else if (w.k[0] * w.k[1] <= kUnrollWindow) {
      values = ctx.lazy(dt, ctx.out_type(0).dims(), [in, w, clamped, ct, dt, lowest](const std::vector<Expr>& idx) {
        Expr m;
        for (int64_t kh = 0; kh < w.k[0]; ++kh)
          for (int64_t kw = 0; kw < w.k[1]; ++kw) {
            Expr v = window_value(in, w, clamped, idx, kh, kw, lowest, ct);
            m = m ? binary(ExprOp::Max, m, v, ct) : v;
          }
        return cast(m, dt);
      }, {&in});
    } else {
      values = drop_window_dims(ctx, ctx.reduce(win, {r - 2, r - 1}, ReduceOp::Max, dt, ct));
    }
    if (w.k[0] * w.k[1] <= kUnrollWindow && H * Wd < (int64_t{1} << 31)) {
      // The index unrolled too, as a pointwise op (vectorized along the output width,
      // parallel over rows) instead of a scalar argmax loop per output element. It
      // follows ATen's CPU kernel (`val > maxval || isnan(val)`): the first maximum
      // wins, and the last NaN (every NaN replaces the best so far); the starting
      // position is window position 0.
      bool flt = is_float(ct);
      TensorIR index = ctx.lazy(DType::I64, ctx.out_type(1).dims(), [in, w, tested, Wd, ct, lowest, flt](const std::vector<Expr>& idx) {
        size_t lead = idx.size() - 2;
        Expr best = const_of(lowest, ct);
        Expr arg;
        for (int64_t kh = 0; kh < w.k[0]; ++kh)
          for (int64_t kw = 0; kw < w.k[1]; ++kw) {
            Expr v = window_value(in, w, tested, idx, kh, kw, lowest, ct);
            Expr ih = add(mul(idx[lead], w.s[0]), kh * w.d[0] - w.p[0]);
            Expr iw = add(mul(idx[lead + 1], w.s[1]), kw * w.d[1] - w.p[1]);
            // 32-bit positions (H * W < 2^31 here): lanes as wide as the float compares
            // that select them, which GCC vectorizes; 64-bit selects it did not.
            Expr pos = cast(add(mul(ih, Wd), iw), DType::I32);
            if (!arg) {
              arg = pos;
            }
            Expr take = cmp(ExprOp::Gt, v, best);
            // Bitwise, not logical: GCC does not vectorize a short-circuit || here (nor,
            // next to strided loads and 64-bit stores, a test of `best` for NaN).
            if (flt) take = binary(ExprOp::BitOr, take, cmp(ExprOp::Ne, v, v), DType::Bool);
            arg = where(take, pos, arg);
            best = where(take, v, best);
          }
        return cast(arg, DType::I64);
      }, {&in});
      return std::vector<TensorIR>{values, index};
    }
    TensorIR pos = ctx.reduce(win, {r - 2, r - 1}, ReduceOp::ArgMax, DType::I64, DType::I64);
    // Window position -> flat index into the input's H*W plane.
    int64_t W = in.sizes[in.rank() - 1].hint();
    TensorIR posv = drop_window_dims(ctx, pos);
    TensorIR flat = ctx.lazy(DType::I64, posv.sizes, [posv, w, W](const std::vector<Expr>& idx) {
      Expr p = posv.fn(idx);
      Expr kh = binary(ExprOp::FloorDiv, p, int_const(w.k[1]), DType::I64);
      Expr kw = binary(ExprOp::Mod, p, int_const(w.k[1]), DType::I64);
      size_t lead = idx.size() - 2;
      Expr ih = add(add(mul(idx[lead], w.s[0]), mul(kh, w.d[0])), -w.p[0]);
      Expr iw = add(add(mul(idx[lead + 1], w.s[1]), mul(kw, w.d[1])), -w.p[1]);
      return add(mul(ih, W), iw);
    }, {&posv});
    return std::vector<TensorIR>{values, flat};
  };
  // grad_input[.., h, w] = sum of grad_output[.., oh, ow] over the windows (oh, ow) that
  // may contain (h, w) and whose saved index is h * W + w. Candidates are visited in
  // increasing (oh, ow), the order in which ATen's CPU kernel accumulates.
  t["aten.max_pool2d_with_indices_backward.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static_spatial(ctx, n);
    const TensorIR& grad = ctx.tensor(n.args[0]);
    const TensorIR& self = ctx.tensor(n.args[1]);
    const TensorIR& indices = ctx.tensor(n.args[7]);
    if (self.rank() < 3 || grad.sizes != indices.sizes) throw Unsupported("max_pool2d_backward shapes");
    Window w = window_args(n, 2, true);
    int64_t W = self.sizes[self.rank() - 1].hint();
    std::vector<int64_t> out_hw = last2(hints(grad.sizes));
    int64_t nh = window_candidates(int_const(0), w, 0).count, nw = window_candidates(int_const(0), w, 1).count;
    if (nh * nw > kUnrollWindow) throw Unsupported("max_pool2d_backward with many overlapping windows");
    DType dt = ctx.out_type().dtype;
    DType ct = compute_type(dt);
    return std::vector<TensorIR>{ctx.lazy(dt, self.sizes, [grad, indices, w, W, out_hw, ct, dt](const std::vector<Expr>& idx) {
      size_t lead = idx.size() - 2;
      Expr h = idx[lead], x = idx[lead + 1];
      Expr flat = add(mul(h, W), x);
      Candidates ch = window_candidates(h, w, 0), cw = window_candidates(x, w, 1);
      auto real = [&](Expr o, Expr i, int dim, int64_t out) {
        Expr c = binary(ExprOp::LogicalAnd, cmp(ExprOp::Ge, o, int_const(0)), cmp(ExprOp::Lt, o, int_const(out)),
                        DType::Bool);
        return binary(ExprOp::LogicalAnd, c, cmp(ExprOp::Le, mul(o, w.s[dim]), add(i, w.p[dim])), DType::Bool);
      };
      auto clamp = [](Expr o, int64_t out) {
        return binary(ExprOp::Min, binary(ExprOp::Max, o, int_const(0), DType::I64), int_const(out - 1), DType::I64);
      };
      // From +0, as ATen's zero-filled gradient: a lone -0 contribution stays +0.
      Expr total = const_of(0.0, ct);
      for (int64_t jh = 0; jh < ch.count; ++jh) {
        Expr oh = add(ch.first, jh);
        for (int64_t jw = 0; jw < cw.count; ++jw) {
          Expr ow = add(cw.first, jw);
          std::vector<Expr> at(idx.begin(), idx.begin() + lead);
          at.push_back(clamp(oh, out_hw[0]));
          at.push_back(clamp(ow, out_hw[1]));
          Expr hit = binary(ExprOp::LogicalAnd, real(oh, h, 0, out_hw[0]), real(ow, x, 1, out_hw[1]), DType::Bool);
          hit = binary(ExprOp::LogicalAnd, hit, cmp(ExprOp::Eq, cast(indices.fn(at), DType::I64), flat), DType::Bool);
          total = binary(ExprOp::Add, total, where(hit, cast(grad.fn(at), ct), const_of(0.0, ct)), ct);
        }
      }
      return cast(total, dt);
    }, {&grad, &indices})};
  };
  t["aten.avg_pool2d.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static_spatial(ctx, n);
    const TensorIR& in = ctx.tensor(n.args[0]);
    if (in.rank() < 3) throw Unsupported("avg_pool2d input rank");
    Window w = window_args(n, 1, false);
    bool count_include_pad = n.args.size() <= 5 || n.args[5].is_none() || n.args[5].b;
    std::optional<int64_t> divisor;
    if (n.args.size() > 6 && !n.args[6].is_none()) divisor = n.args[6].as_int();
    DType dt = in.dtype;
    DType ct = compute_type(dt);
    if (!is_float(ct)) throw Unsupported("avg_pool2d of integers");
    std::vector<int64_t> out_hw = last2(ctx.out_type().sizes);
    int64_t H = in.sizes[in.rank() - 2].hint(), W = in.sizes[in.rank() - 1].hint();
    TensorIR sum;
    if (w.k[0] * w.k[1] <= kUnrollWindow) {
      const Plane tested = plane_of(w, H, W, out_hw, false, false);  // a sum counts each position once
      sum = ctx.lazy(ct, ctx.out_type().dims(), [in, w, tested, ct](const std::vector<Expr>& idx) {
        Expr total;
        for (int64_t kh = 0; kh < w.k[0]; ++kh)
          for (int64_t kw = 0; kw < w.k[1]; ++kw) {
            Expr v = window_value(in, w, tested, idx, kh, kw, 0.0, ct);
            total = total ? binary(ExprOp::Add, total, v, ct) : v;
          }
        return total;
      }, {&in});
    } else {
      TensorIR win = windows(ctx, in, out_hw, w, 0.0, ct);
      int64_t r = win.rank();
      sum = drop_window_dims(ctx, ctx.reduce(win, {r - 2, r - 1}, ReduceOp::Sum, ct, ct));
    }
    return std::vector<TensorIR>{ctx.lazy(dt, sum.sizes, [sum, w, H, W, count_include_pad, divisor, ct, dt](const std::vector<Expr>& idx) {
      Expr total = sum.fn(idx);
      if (divisor) return cast(op2(ExprOp::Div, total, const_of(static_cast<double>(*divisor), ct)), dt);
      size_t lead = idx.size() - 2;
      auto extent = [&](Expr o, int i, int64_t size) {
        Expr start = add(mul(o, w.s[i]), -w.p[i]);
        Expr end = binary(ExprOp::Min, add(start, w.k[i]), int_const(size + w.p[i]), DType::I64);
        if (!count_include_pad) {
          start = binary(ExprOp::Max, start, int_const(0), DType::I64);
          end = binary(ExprOp::Min, end, int_const(size), DType::I64);
        }
        return binary(ExprOp::Sub, end, start, DType::I64);
      };
      Expr count = binary(ExprOp::Mul, extent(idx[lead], 0, H), extent(idx[lead + 1], 1, W), DType::I64);
      return cast(op2(ExprOp::Div, total, cast(count, ct)), dt);
    }, {&sum})};
  };
  t["aten._adaptive_avg_pool2d.default"] = [](LowerCtx& ctx, const Node& n) {
    require_static_spatial(ctx, n);
    const TensorIR& in = ctx.tensor(n.args[0]);
    if (in.rank() < 3) throw Unsupported("adaptive_avg_pool2d input rank");
    DType dt = in.dtype;
    DType ct = compute_type(dt);
    std::vector<int64_t> out_hw = last2(ctx.out_type().sizes);
    int64_t H = in.sizes[in.rank() - 2].hint(), W = in.sizes[in.rank() - 1].hint();
    if (H % out_hw[0] != 0 || W % out_hw[1] != 0) throw Unsupported("adaptive pooling with uneven windows");
    if (out_hw[0] == 1 && out_hw[1] == 1) {
      // Global average pooling: a plain mean over H and W.
      TensorIR s = ctx.reduce(in, {in.rank() - 2, in.rank() - 1}, ReduceOp::Sum, ct, ct);
      double count = static_cast<double>(H * W);
      return std::vector<TensorIR>{ctx.lazy(dt, s.sizes, [s, count, ct, dt](const std::vector<Expr>& idx) {
        return cast(op2(ExprOp::Div, s.fn(idx), const_of(count, ct)), dt);
      }, {&s})};
    }
    Window w{{H / out_hw[0], W / out_hw[1]}, {H / out_hw[0], W / out_hw[1]}, {0, 0}, {1, 1}};
    TensorIR win = windows(ctx, in, out_hw, w, 0.0, ct);
    int64_t r = win.rank();
    TensorIR sum = drop_window_dims(ctx, ctx.reduce(win, {r - 2, r - 1}, ReduceOp::Sum, ct, ct));
    double count = static_cast<double>(w.k[0] * w.k[1]);
    return std::vector<TensorIR>{ctx.lazy(dt, sum.sizes, [sum, count, ct, dt](const std::vector<Expr>& idx) {
      return cast(op2(ExprOp::Div, sum.fn(idx), const_of(count, ct)), dt);
    }, {&sum})};
  };
}

}  // namespace ember
