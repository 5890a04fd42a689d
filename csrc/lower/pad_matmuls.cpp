#include "lower/pad_matmuls.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ember {

namespace {

using Ints = std::vector<int64_t>;

// Which tensor arguments of a matmul extern are the bias (-1: none), a and b.
struct MatmulArgs {
  int bias = -1, a = 0, b = 1;
};

std::optional<MatmulArgs> matmul_args(const std::string& op) {
  if (op == "aten.mm.default" || op == "aten.bmm.default") return MatmulArgs{-1, 0, 1};
  if (op == "aten.addmm.default" || op == "aten.baddbmm.default") return MatmulArgs{0, 1, 2};
  return std::nullopt;
}

// Elements in 16 bytes, for the dtypes cuBLAS has aligned kernels for; 0 for the others.
int64_t alignment(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16: return 8;
    case DType::F32: return 4;
    default: return 0;
  }
}

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// A view whose sizes, strides and offset are all static.
struct Layout {
  Ints sizes, strides;
  int64_t offset = 0;
  int rank() const { return static_cast<int>(sizes.size()); }
};

std::optional<Layout> static_layout(const StridedView& v) {
  auto sizes = values(v.sizes), strides = values(v.strides);
  if (!sizes || !strides || !v.offset.is_static()) return std::nullopt;
  return Layout{*sizes, *strides, v.offset.hint()};
}

// A 2-D matmul whose row count M alone is symbolic (a dynamic batch or sequence): a's
// and the result's other sizes, strides and offsets static. Fills their layouts at the
// hints (the decisions below read only K, N, strides and cost figures, which a symbolic
// M changes only in scale) and returns M.
std::optional<Dim> symbolic_rows(const StridedView& a, const Buffer& out, std::optional<Layout>& a_at_hints,
                                 Ints& out_sizes, Ints& out_strides) {
  if (a.sizes.size() != 2 || out.sizes.size() != 2 || a.sizes[0].is_static() || !a.sizes[1].is_static() ||
      !a.offset.is_static() || out.sizes[0] != a.sizes[0] || !out.sizes[1].is_static())
    return std::nullopt;
  auto a_strides = values(a.strides), o_strides = values(out.strides);
  if (!a_strides || !o_strides) return std::nullopt;
  a_at_hints = Layout{hints(a.sizes), *a_strides, a.offset.hint()};
  out_sizes = hints(out.sizes);
  out_strides = *o_strides;
  return a.sizes[0];
}

// A matrix (the last two dims) stored by columns, as a transposed view is: its leading
// dim is its row count. ATen passes it to cuBLAS as a transposed operand.
bool column_major(const Layout& v) {
  int r = v.rank() - 2, c = v.rank() - 1;
  return v.sizes[c] > 1 && v.strides[c] != 1 && v.strides[r] == 1;
}

// Whether ATen hands the view to cuBLAS as it is, 16-byte aligned: unit stride along
// the matrix's contiguous dim, and the offset and every other stride multiples of `align`.
bool aligned(const Layout& v, int64_t align) {
  if (v.offset % align) return false;
  int inner = column_major(v) ? v.rank() - 2 : v.rank() - 1;
  if (v.sizes[inner] > 1 && v.strides[inner] != 1) return false;  // ATen would copy it
  for (int d = 0; d < v.rank(); ++d)
    if (d != inner && v.sizes[d] > 1 && v.strides[d] % align) return false;
  return true;
}

// A padded operand's memory order, outermost first: the batch dims, then the matrix in
// the order the view has it (a transposed operand stays transposed, so the copy reads
// its source in order).
std::vector<int> matrix_order(const Layout& v) {
  std::vector<int> order;
  for (int d = 0; d < v.rank() - 2; ++d) order.push_back(d);
  int r = v.rank() - 2, c = v.rank() - 1;
  if (column_major(v)) order.insert(order.end(), {c, r});
  else order.insert(order.end(), {r, c});
  return order;
}

std::vector<int> logical_order(int rank) {
  std::vector<int> order(rank);
  for (int d = 0; d < rank; ++d) order[d] = d;
  return order;
}

Ints dense_strides(const Ints& sizes, const std::vector<int>& order) {
  Ints strides(sizes.size());
  int64_t s = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = s;
    s *= std::max<int64_t>(sizes[*it], 1);
  }
  return strides;
}

int64_t numel(const Ints& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string us_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, us < 10 ? "%.1f us" : "%.0f us", us);
  return buf;
}

std::string pow2_text(int64_t v) {
  int e = 0;
  while ((int64_t(1) << (e + 1)) <= v) ++e;
  return "2^" + std::to_string(e);
}

// Row-major strides (a size-1 dim: the product of the sizes after it, as dense_strides).
Dims row_major_strides(const Dims& sizes) {
  Dims strides(sizes.size());
  Dim run(int64_t{1});
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = run;
    if (sizes[d] != Dim(int64_t{0})) run = run * sizes[d];
  }
  return strides;
}

// `v`, a view of a row-major buffer of sizes `from` (strides `from_strides`), as a view
// of the same elements in a buffer of those sizes laid out with `to_strides` (a padded
// copy's). Only a reshape of the whole buffer maps dim for dim: offset 0, and v's non-unit
// dims, innermost first, grouping into runs whose sizes multiply to each of the buffer's
// (GPT-2's logits [8,512,N] of the LM head's [4096,N]); none otherwise. Sizes may be
// symbolic: the groups must then be equal as size expressions.
std::optional<StridedView> rebased_reshape(const StridedView& v, const Dims& from, const Dims& from_strides,
                                           const Dims& to_strides) {
  const Dim zero(int64_t{0}), one(int64_t{1});
  if (v.offset != zero) return std::nullopt;
  for (const Dim& s : from)
    if (s == zero) return std::nullopt;
  for (const Dim& s : v.sizes)
    if (s == zero) return std::nullopt;
  StridedView r = v;
  int k = static_cast<int>(v.sizes.size()) - 1;
  auto skip_units = [&] {
    while (k >= 0 && v.sizes[k] == one) --k;
  };
  for (int d = static_cast<int>(from.size()) - 1; d >= 0; --d) {
    if (from[d] == one) continue;
    Dim run = one;  // the elements of from[d] the group's dims so far span
    while (run != from[d]) {
      skip_units();
      if (k < 0 || v.strides[k] != from_strides[d] * run || run.hint() * v.sizes[k].hint() > from[d].hint())
        return std::nullopt;
      r.strides[k] = to_strides[d] * run;
      run = run * v.sizes[k];
      --k;
    }
  }
  skip_units();
  if (k >= 0) return std::nullopt;
  return r;
}

class Padder {
 public:
  Padder(Program& p, const Graph& g, const PadMatmulOptions& opts) : p_(p), g_(g), opts_(opts) {}

  void run() {
    std::vector<Step> old = std::move(p_.steps);
    p_.steps.clear();
    for (const Step& s : old) {
      if (s.kind == Step::Kind::Extern) pad_extern(s.index);
      else p_.steps.push_back(s);
    }
  }

 private:
  // Appends the extern's step, preceded by its operands' copies and followed by the
  // copy of its result's slice, as the extern needs.
  void pad_extern(int call) {
    std::string note = plan_and_pad(call);
    if (!note.empty()) p_.externs[call].reason += "; " + note;
  }

  std::string plan_and_pad(int call) {
    const Step step{Step::Kind::Extern, call};
    ExternCall& e = p_.externs[call];
    auto args = matmul_args(g_.nodes[e.node].op);
    size_t tensors = args && args->bias >= 0 ? 3 : 2;
    bool opaque = std::any_of(e.tensor_views.begin(), e.tensor_views.end(),
                              [&](const StridedView& v) { return p_.buffers[v.buffer].opaque; });
    if (!args || opaque || e.output_buffers.size() != 1 || e.output_buffers[0] < 0 ||
        e.tensor_views.size() != tensors || p_.buffers[e.output_buffers[0]].opaque) {
      p_.steps.push_back(step);
      return "";
    }
    const Buffer& out = p_.buffers[e.output_buffers[0]];
    auto a = static_layout(e.tensor_views[args->a]), b = static_layout(e.tensor_views[args->b]);
    auto out_sizes = values(out.sizes), out_strides = values(out.strides);
    std::optional<Dim> rows;  // M, when it alone is symbolic
    if (!a && out_sizes == std::nullopt) {
      Ints hs, hst;
      if ((rows = symbolic_rows(e.tensor_views[args->a], out, a, hs, hst))) {
        out_sizes = hs;
        out_strides = hst;
      }
    }
    const int64_t align = alignment(out.dtype);
    if (!a || !b || !out_sizes || !out_strides || !align || a->rank() < 2 || a->rank() != b->rank() ||
        a->rank() != static_cast<int>(out_sizes->size()) || *out_strides != dense_strides(*out_sizes, logical_order(a->rank()))) {
      p_.steps.push_back(step);
      return "";
    }
    // result [.., M, N] = a [.., M, K] @ b [.., K, N]. The result is row-major: N is its
    // leading dim. K is a's when a is row-major, b's when b is column-major; M is a's
    // when a is column-major.
    const int r = a->rank() - 2;
    const int64_t M = a->sizes[r], K = a->sizes[r + 1], N = b->sizes[r + 1];
    int64_t batch = 1;
    for (int d = 0; d < r; ++d) batch *= (*out_sizes)[d];
    const bool pad_n = N % align, pad_m = M % align && column_major(*a),
               pad_k = K % align && (!column_major(*a) || column_major(*b));
    Ints pa = a->sizes, pb = b->sizes, pr = *out_sizes;
    if (pad_m) pa[r] = pr[r] = round_up(M, align);
    if (pad_k) pa[r + 1] = pb[r] = round_up(K, align);
    if (pad_n) pb[r + 1] = pr[r + 1] = round_up(N, align);
    const bool copy_a = pa != a->sizes || !aligned(*a, align), copy_b = pb != b->sizes || !aligned(*b, align);
    std::optional<Layout> bias;
    Ints pbias;
    if (args->bias >= 0) {
      bias = static_layout(e.tensor_views[args->bias]);
      if (!bias || bias->rank() > a->rank()) {
        p_.steps.push_back(step);
        return "";
      }
      // A bias broadcasts against the result: its non-unit dims grow with the result's.
      pbias = bias->sizes;
      const int lead = a->rank() - bias->rank();
      for (int d = 0; d < bias->rank(); ++d)
        if (bias->sizes[d] != 1) pbias[d] = pr[lead + d];
    }
    const bool copy_bias = bias && pbias != bias->sizes;
    if (!pad_n && !copy_a && !copy_b) {  // every leading dim is aligned already
      p_.steps.push_back(step);
      return "";
    }
    // With symbolic rows only b, the bias and the result change (a's copy would have
    // symbolic sizes, and a bias that grows with M too).
    if (rows && (copy_a || pad_m || (copy_bias && bias->rank() == 2 && bias->sizes[0] != 1))) {
      p_.steps.push_back(step);
      return "not padded: a's copy would have a symbolic row count";
    }

    std::string sizes;
    auto grown = [&](const char* dim, bool pad, int64_t from, int64_t to) {
      if (pad) sizes += std::string(sizes.empty() ? "" : ", ") + dim + " " + std::to_string(from) + "->" + std::to_string(to);
    };
    grown("M", pad_m, M, pr[r]);
    grown("K", pad_k, K, pa[r + 1]);
    grown("N", pad_n, N, pr[r + 1]);
    if (sizes.empty()) sizes = "misaligned operand views";
    const int64_t macs = batch * M * N * K, moved = batch * (M * K + K * N + M * N);
    if (macs < opts_.min_macs) {
      p_.steps.push_back(step);
      return "not padded (" + sizes + "): " + std::to_string(macs) + " multiply-adds, under " + pow2_text(opts_.min_macs);
    }
    if (macs < opts_.min_intensity * moved) {
      p_.steps.push_back(step);
      return "not padded (" + sizes + "): memory-bound, " + std::to_string(macs / std::max<int64_t>(moved, 1)) +
             " multiply-adds per element, under " + std::to_string(opts_.min_intensity);
    }
    // Python binds extern arguments by value: one value passed twice must stay one view.
    for (size_t i = 0; i < e.tensor_args.size(); ++i)
      for (size_t j = i + 1; j < e.tensor_args.size(); ++j)
        if (e.tensor_args[i] == e.tensor_args[j]) {
          p_.steps.push_back(step);
          return "not padded (" + sizes + "): one value is two of its operands";
        }
    // Bytes copied on every call: operands that are not graph inputs (those are padded once),
    // read and written, and a wider result's slice (read and written) unless only rows grew.
    const int64_t item = dtype_size(out.dtype);
    auto per_call = [&](int arg, const Layout& l, const Ints& padded) -> int64_t {
      if (once(e.tensor_views[arg])) return 0;
      return (numel(l.sizes) + numel(padded)) * item;
    };
    int64_t copied_bytes = 0;
    if (copy_a) copied_bytes += per_call(args->a, *a, pa);
    if (copy_b) copied_bytes += per_call(args->b, *b, pb);
    if (copy_bias) copied_bytes += per_call(args->bias, *bias, pbias);
    // The slice's copy, unless the graph only returns it (as a view of the wider result).
    Dims padded_result = to_dims(pr);
    if (rows) padded_result[r] = *rows;  // the result's rows stay symbolic (M is never padded then)
    const int o = e.output_buffers[0];
    const bool slice_returned = pad_n && !read_in_graph(o) &&
                                views_of_padded(o, out.sizes, out.strides, row_major_strides(padded_result));
    if (pad_n && !slice_returned) copied_bytes += 2 * numel(*out_sizes) * item;
    const double copy_us = 1e6 * double(copied_bytes) / opts_.copy_bytes_per_s;
    const double saved_us = 1e6 * double(macs) * (1.0 / opts_.unaligned_macs_per_s - 1.0 / opts_.aligned_macs_per_s);
    if (copy_us >= saved_us) {
      p_.steps.push_back(step);
      return "not padded (" + sizes + "): its copies cost ~" + us_text(copy_us) + " a call, the aligned kernel saves ~" +
             us_text(saved_us);
    }

    std::string copied;
    auto copy = [&](int arg, const Layout& l, const Ints& padded, const std::vector<int>& order, const char* name) {
      if (once(e.tensor_views[arg])) {
        e.padded_args.push_back({arg, to_dims(padded), to_dims(dense_strides(padded, order))});
        copied += std::string(copied.empty() ? "" : ", ") + name + " (a graph input: padded once)";
        return;
      }
      size_t before = p_.computed.size();
      e.tensor_views[arg] = padded_copy(e.tensor_views[arg], l, padded, order);
      copied += std::string(copied.empty() ? "" : ", ") + name + (p_.computed.size() == before ? " (shared)" : "");
    };
    if (copy_a) copy(args->a, *a, pa, matrix_order(*a), "a");
    if (copy_b) copy(args->b, *b, pb, matrix_order(*b), "b");
    if (copy_bias) copy(args->bias, *bias, pbias, logical_order(bias->rank()), "bias");
    p_.steps.push_back(step);
    std::string result;
    if (pr != *out_sizes) result = "; " + resize_result(call, padded_result);
    std::string cost;
    if (std::isfinite(opts_.copy_bytes_per_s))
      cost = "; per-call copies ~" + us_text(copy_us) + ", the aligned kernel saves ~" + us_text(saved_us);
    return "padded for 16-byte leading dims (" + sizes + "): copies of " + copied + result + cost;
  }

  // Whether an operand is padded once by the runtime: a view of a graph input (a parameter,
  // the same on every call; another input costs the runtime's copy per call, as a kernel would).
  bool once(const StridedView& v) const {
    const Buffer& b = p_.buffers[v.buffer];
    return opts_.pad_inputs_once && b.kind == Buffer::Kind::Input && !b.opaque;
  }

  // A dense copy of `v` with `padded` sizes laid out in `order`, zero where `v` has no
  // element; one copy serves every extern that pads the same memory the same way.
  StridedView padded_copy(const StridedView& v, const Layout& l, const Ints& padded, const std::vector<int>& order) {
    const Ints strides = dense_strides(padded, order);
    std::string key = std::to_string(v.buffer) + "@" + std::to_string(l.offset);
    for (int d : order)
      key += " " + std::to_string(l.sizes[d]) + ":" + std::to_string(l.strides[d]) + ">" + std::to_string(padded[d]);
    auto it = copies_.find(key);
    if (it == copies_.end()) it = copies_.emplace(key, add_copy(v, l, padded, strides, order)).first;
    return StridedView{it->second, v.dtype, to_dims(padded), to_dims(strides), 0};
  }

  int add_copy(const StridedView& v, const Layout& l, const Ints& padded, const Ints& strides,
               const std::vector<int>& order) {
    Buffer b;
    b.kind = Buffer::Kind::Computed;
    b.dtype = v.dtype;
    b.sizes = to_dims(padded);
    b.strides = to_dims(strides);
    ComputedBuffer c;
    c.buffer = p_.add_buffer(b);
    c.sizes = b.sizes;
    c.iter_order = order;
    std::vector<Expr> idx;
    Expr inside;
    for (size_t d = 0; d < padded.size(); ++d) {
      if (padded[d] == 1) {
        c.vars.push_back(-1);
        idx.push_back(int_const(0));
        continue;
      }
      c.vars.push_back(p_.num_vars++);
      idx.push_back(var(c.vars.back()));
      if (padded[d] == l.sizes[d]) continue;
      Expr in = binary(ExprOp::Lt, idx.back(), int_const(l.sizes[d]), DType::Bool);
      inside = inside ? binary(ExprOp::LogicalAnd, inside, in, DType::Bool) : in;
    }
    // Guarded: a load outside the source is never evaluated (Expr's Where).
    Expr x = load(v.buffer, strided_index(idx, v.strides, v.offset), v.dtype);
    c.body = inside ? where(inside, x, const_of(0.0, v.dtype)) : x;
    int id = c.buffer;
    p_.steps.push_back({Step::Kind::Compute, static_cast<int>(p_.computed.size())});
    p_.computed.push_back(std::move(c));
    return id;
  }

  // Gives the extern's result the padded sizes. When the original elements keep their
  // offsets (only the outermost dim grew) the buffer just grows; otherwise the extern
  // writes a new, padded buffer and the original becomes an ember copy of its slice,
  // so every reader still finds the layout it was lowered for. A graph output that is
  // the slice (or a reshape of it) is returned as a view of the padded buffer instead,
  // where the caller takes any strides (Graph::any_strides_outputs), as Inductor returns
  // its padded matmuls' slices: no copy for it (GPT-2's logits, 412 MB at 8x512 in bf16).
  // Returns the note for the extern's reason.
  std::string resize_result(int call, const Dims& padded) {
    const int o = p_.externs[call].output_buffers[0];
    const Dims strides = row_major_strides(padded);
    const Dims old_sizes = p_.buffers[o].sizes, old_strides = p_.buffers[o].strides;
    bool same_offsets = true;
    for (size_t d = 0; d < padded.size(); ++d)
      if (old_sizes[d] != Dim(int64_t{1}) && old_sizes[d] != Dim(int64_t{0}) && old_strides[d] != strides[d])
        same_offsets = false;
    if (same_offsets) {
      p_.buffers[o].sizes = padded;
      p_.buffers[o].strides = strides;
      return "result grows";
    }
    Buffer wide = p_.buffers[o];
    wide.sizes = padded;
    wide.strides = strides;
    const int w = p_.add_buffer(wide);
    p_.externs[call].output_buffers[0] = w;
    const auto views = views_of_padded(o, old_sizes, old_strides, strides);
    if (views)
      for (const auto& [k, v] : *views) {
        p_.outputs[k].view = v;
        p_.outputs[k].view.buffer = w;
      }
    const bool returned = views.has_value();
    const bool read = read_in_graph(o);
    Buffer& slice = p_.buffers[o];
    slice.kind = Buffer::Kind::Computed;
    slice.extern_call = -1;
    slice.extern_output = 0;
    // With every output a view of the padded buffer and no reader, the copy is dead code
    // (eliminate_dead_code, the next pass, drops it).
    ComputedBuffer c;
    c.buffer = o;
    c.sizes = slice.sizes;
    c.iter_order = logical_order(static_cast<int>(old_sizes.size()));
    std::vector<Expr> idx;
    for (const Dim& s : old_sizes) {
      c.vars.push_back(s == Dim(int64_t{1}) ? -1 : p_.num_vars++);
      idx.push_back(s == Dim(int64_t{1}) ? int_const(0) : var(c.vars.back()));
    }
    c.body = load(w, strided_index(idx, wide.strides, 0), slice.dtype);
    p_.steps.push_back({Step::Kind::Compute, static_cast<int>(p_.computed.size())});
    p_.computed.push_back(std::move(c));
    if (!returned) return "result sliced by a copy";
    return read ? "result returned as a strided view, sliced by a copy for its readers"
                : "result returned as a strided view";
  }

  // The graph outputs that view buffer `o` (the slice: sizes `from`, row-major
  // `from_strides`) as views of the same elements in the padded buffer (strides
  // `to_strides`; their buffer left to set), by output position; none unless there is one
  // and every one maps (rebased_reshape) and takes any strides. All or none: outputs that
  // view one buffer may alias each other.
  using OutputViews = std::vector<std::pair<size_t, StridedView>>;
  std::optional<OutputViews> views_of_padded(int o, const Dims& from, const Dims& from_strides,
                                             const Dims& to_strides) const {
    OutputViews views;
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      const ProgramOutput& out = p_.outputs[k];
      if (!out.is_tensor || out.view.buffer != o) continue;
      if (!g_.output_takes_any_strides(static_cast<int>(k))) return std::nullopt;
      auto v = rebased_reshape(out.view, from, from_strides, to_strides);
      if (!v) return std::nullopt;
      views.emplace_back(k, *v);
    }
    if (views.empty()) return std::nullopt;
    return views;
  }

  // Whether a step reads buffer `b` (a kernel's load or an extern's argument).
  bool read_in_graph(int b) const {
    for (const ComputedBuffer& c : p_.computed) {
      auto loads = loaded_buffers(c);
      if (std::find(loads.begin(), loads.end(), b) != loads.end()) return true;
    }
    for (const ExternCall& e : p_.externs)
      for (const StridedView& v : e.tensor_views)
        if (v.buffer == b) return true;
    return false;
  }

  Program& p_;
  const Graph& g_;
  const PadMatmulOptions& opts_;
  std::map<std::string, int> copies_;  // padded copies by source memory and padding
};

}  // namespace

void pad_matmuls(Program& p, const Graph& g, const PadMatmulOptions& opts) { Padder(p, g, opts).run(); }

}  // namespace ember
