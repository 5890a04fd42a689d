#include "schedule/fuse.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/affine.h"
#include "schedule/name_kernels.h"

namespace ember {

namespace {

// How a computed buffer's dims map onto a kernel's loops.
struct Shape {
  Dims dims;                       // non-unit iteration sizes, outermost first
  std::vector<int> vars;           // the buffer's var for each of dims
  Dims rdims;                      // reductions: non-unit reduce sizes
  std::vector<int> rvars;
};

Shape shape_of(const ComputedBuffer& c) {
  Shape s;
  for (int d : c.iter_order)
    if (c.sizes[d] != 1 && d != c.scan_dim) {
      s.dims.push_back(c.sizes[d]);
      s.vars.push_back(c.vars[d]);
    }
  for (size_t d = 0; d < c.reduce_sizes.size(); ++d)
    if (c.reduce_sizes[d] != 1) {
      s.rdims.push_back(c.reduce_sizes[d]);
      s.rvars.push_back(c.reduce_vars[d]);
    }
  return s;
}

// A reduction whose input is contiguous along its last kept dim and strided along
// every reduced dim (a channels-last spatial mean, a column sum) is better computed
// as a vector reduction over that kept dim (see Stage::vector_reduce).
bool prefers_vector_reduce(const ComputedBuffer& c, const Shape& shape) {
  if (!c.is_reduction || c.scan_dim >= 0 || shape.dims.empty() || shape.rdims.empty()) return false;
  if (c.is_arg_reduction()) return false;
  // The lane arrays are sized at compile time: a symbolic kept dim stays a row reduction.
  if (!shape.dims.back().is_static()) return false;
  if (shape.dims.back().hint() < 8 || shape.dims.back().hint() > 4096) return false;
  const int kept = shape.vars.back();
  std::optional<bool> verdict;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (verdict) return;
    if (e->op == ExprOp::Load) {
      auto ck = coefficient(e->args[0], kept);
      if (ck && *ck == 1) {
        bool strided = true;
        for (int r : shape.rvars) {
          auto cr = coefficient(e->args[0], r);
          strided = strided && cr && *cr != 1 && *cr != 0;
        }
        verdict = strided;
        return;
      }
    }
    for (const auto& a : e->args) walk(a);
  };
  walk(c.body);
  return verdict.value_or(false);
}

// The outer (parallel) loop a buffer would get in a kernel of its own.
Dims own_outer(const ComputedBuffer& c, const Shape& shape) {
  if (c.is_reduction) {
    Dims outer = shape.dims;
    if (prefers_vector_reduce(c, shape)) outer.pop_back();
    return outer;
  }
  if (shape.dims.size() >= 2) return {shape.dims.begin(), shape.dims.end() - 1};
  return shape.dims;
}

struct Where {
  int kernel = -1;
  int stage = -1;
  int item = -1;
};

class Fuser {
 public:
  Fuser(const Program& p, const FuseOptions& opts) : p_(p), opts_(opts) {
    position_.assign(p.buffers.size(), -1);
    where_.assign(p.buffers.size(), Where{});
  }

  Schedule run() {
    for (const auto& step : p_.steps) {
      if (step.kind == Step::Kind::Extern) {
        s_.steps.push_back({Schedule::Step::Kind::Extern, step.index});
        int pos = static_cast<int>(s_.steps.size()) - 1;
        for (int b : p_.externs[step.index].output_buffers)
          if (b >= 0) position_[b] = pos;
        continue;
      }
      place(step.index);
    }
    for (size_t i = 0; i < s_.kernels.size(); ++i) s_.kernels[i].name = short_kernel_name(static_cast<int>(i));
    return std::move(s_);
  }

 private:
  void place(int ci) {
    const ComputedBuffer& c = p_.computed[ci];
    Shape shape = shape_of(c);
    int earliest = 0;
    for (int b : loaded_buffers(c)) earliest = std::max(earliest, position_[b]);
    // A scatter-add's kernel adds into a buffer its first launch zeroes: nothing shares it.
    if (opts_.enabled && !c.is_scatter_add()) {
      for (int pos = static_cast<int>(s_.steps.size()) - 1; pos >= earliest && pos >= 0; --pos) {
        const auto& step = s_.steps[pos];
        if (step.kind != Schedule::Step::Kind::Kernel) continue;
        if (try_join(step.index, pos, ci, shape)) return;
      }
    }
    Kernel k;
    k.outer = own_outer(c, shape);
    s_.kernels.push_back(std::move(k));
    s_.steps.push_back({Schedule::Step::Kind::Kernel, static_cast<int>(s_.kernels.size()) - 1});
    bool ok = try_join(static_cast<int>(s_.kernels.size()) - 1, static_cast<int>(s_.steps.size()) - 1, ci, shape, true);
    (void)ok;  // a fresh kernel always accepts its first buffer
  }

  // `fresh`: the kernel was made for this buffer (it always fits).
  bool try_join(int ki, int pos, int ci, const Shape& shape, bool fresh = false) {
    Kernel& k = s_.kernels[ki];
    const ComputedBuffer& c = p_.computed[ci];
    if (!fresh && k.scatter_adds()) return false;
    // Loop shape.
    Dims inner;
    std::unordered_map<int, Expr> sub;
    bool vector = false;
    if (c.is_reduction) {
      if (shape.dims == k.outer) {
        for (size_t i = 0; i < shape.dims.size(); ++i) sub[shape.vars[i]] = var(outer_var(static_cast<int>(i)));
        inner = shape.rdims;
        for (size_t i = 0; i < shape.rdims.size(); ++i) sub[shape.rvars[i]] = var(inner_var(static_cast<int>(i)));
      } else if (shape.dims.size() == k.outer.size() + 1 && std::equal(k.outer.begin(), k.outer.end(), shape.dims.begin()) &&
                 prefers_vector_reduce(c, shape)) {
        vector = true;
        for (size_t i = 0; i < k.outer.size(); ++i) sub[shape.vars[i]] = var(outer_var(static_cast<int>(i)));
        sub[shape.vars.back()] = var(inner_var(0));
        inner.push_back(shape.dims.back());
        for (size_t i = 0; i < shape.rdims.size(); ++i) {
          sub[shape.rvars[i]] = var(inner_var(static_cast<int>(i) + 1));
          inner.push_back(shape.rdims[i]);
        }
      } else {
        return false;
      }
    } else {
      // A scan's pointwise consumer whose loops are in another order (the scan kernel
      // loops over [batch, channel] rows and time inside; a [batch, time, channel]
      // epilogue): its vars mapped onto the kernel's by the scan's store index.
      std::unordered_map<int, Expr> by_scan;
      const bool epilogue = scan_epilogue_vars(ki, pos, c, shape, by_scan);
      if (shape.dims.size() < k.outer.size() || !std::equal(k.outer.begin(), k.outer.end(), shape.dims.begin())) {
        return epilogue && join(ki, pos, ci, by_scan, k.stages[0].inner, false);
      }
      // A heuristic: sizes at their hints.
      int64_t rows = product(k.outer).hint();  // 0 for an empty tensor
      // Long rows do not join a kernel of few rows (FuseOptions::long_row_work).
      if (!fresh && rows > 0 && rows <= opts_.few_rows && product(shape.dims).hint() / rows > opts_.long_row_work &&
          (opts_.elementwise_alone || rows < product(own_outer(c, shape)).hint()))
        return false;
      for (size_t i = 0; i < shape.dims.size(); ++i) {
        if (i < k.outer.size()) sub[shape.vars[i]] = var(outer_var(static_cast<int>(i)));
        else sub[shape.vars[i]] = var(inner_var(static_cast<int>(i - k.outer.size())));
      }
      inner.assign(shape.dims.begin() + k.outer.size(), shape.dims.end());
      if (join(ki, pos, ci, sub, inner, false)) return true;
      return epilogue && join(ki, pos, ci, by_scan, k.stages[0].inner, false);
    }
    return join(ki, pos, ci, sub, inner, vector);
  }

  // The vars of c's unit dims have no loop (shape_of leaves those dims out): they are 0.
  // A pass may leave one in an index, as split_long_reductions' row chunks of 1 do
  // ((row + v) * 4099 over a reduce dim of size 1; GPU fuzz seeds 53215, 56224, 56973).
  static void bind_unit_vars(const ComputedBuffer& c, std::unordered_map<int, Expr>& sub) {
    for (size_t d = 0; d < c.sizes.size(); ++d)
      if (c.vars[d] >= 0 && c.sizes[d] == 1 && static_cast<int>(d) != c.scan_dim) sub.emplace(c.vars[d], int_const(0));
    if (c.scan_dim >= 0) return;  // a scan's reduce var is its scan dim's
    for (size_t d = 0; d < c.reduce_sizes.size(); ++d)
      if (c.reduce_vars[d] >= 0 && c.reduce_sizes[d] == 1) sub.emplace(c.reduce_vars[d], int_const(0));
  }

  // Kernel `ki` (at step `pos`) is one stage with a scan, and pointwise buffer `c` reads
  // one of its items (a scan, or a value computed from one): `sub` maps each of c's vars
  // to the kernel var with the same coefficient in that item's store index (the same
  // element), when that is one to one over loops of equal sizes and covers every loop of
  // the kernel. join() then checks every read.
  bool scan_epilogue_vars(int ki, int pos, const ComputedBuffer& c, const Shape& shape,
                          std::unordered_map<int, Expr>& sub) const {
    const Kernel& k = s_.kernels[ki];
    if (k.stages.size() != 1 || k.stages[0].vector_reduce) return false;
    const Stage& st = k.stages[0];
    if (shape.dims.size() != k.outer.size() + st.inner.size() || st.inner.empty()) return false;
    if (std::none_of(st.items.begin(), st.items.end(), [](const KernelItem& it) { return it.is_scan; })) return false;
    std::optional<std::pair<Expr, Expr>> access;  // (c's load index, the scan's store index)
    walk_loads(c.body, [&](const Expr& e) {
      const Where& w = where_[e->ival];
      if (access || w.kernel != ki || position_[e->ival] != pos) return;
      access = std::make_pair(e->args[0], st.items[w.item].store_index);
    });
    if (!access) return false;
    auto load = affine_form(access->first), store = affine_form(access->second);
    if (!load || !store) return false;
    std::map<int, Dim> loops;  // kernel var -> its size
    for (size_t d = 0; d < k.outer.size(); ++d) loops[outer_var(static_cast<int>(d))] = k.outer[d];
    for (size_t d = 0; d < st.inner.size(); ++d) loops[inner_var(static_cast<int>(d))] = st.inner[d];
    std::set<int> taken;
    for (size_t d = 0; d < shape.dims.size(); ++d) {
      const int64_t coef = load->coef_of(shape.vars[d]);
      int match = -1;
      for (const auto& [kv, size] : loops)
        if (coef != 0 && store->coef_of(kv) == coef && size == shape.dims[d] && !taken.count(kv)) {
          if (match >= 0) return false;  // two loops with one stride
          match = kv;
        }
      if (match < 0) return false;
      taken.insert(match);
      sub[shape.vars[d]] = var(match);
    }
    return taken.size() == loops.size();
  }

  // Puts buffer `ci` into kernel `ki` with its vars mapped by `sub` onto loops `inner`,
  // if every read of a buffer of that kernel hits the element this thread produced.
  bool join(int ki, int pos, int ci, std::unordered_map<int, Expr> sub, const Dims& inner, bool vector) {
    Kernel& k = s_.kernels[ki];
    const ComputedBuffer& c = p_.computed[ci];
    bind_unit_vars(c, sub);
    KernelItem item;
    item.computed = ci;
    item.is_scan = c.scan_dim >= 0;
    item.is_reduction = c.is_reduction && !item.is_scan;
    item.value = substitute(c.body, sub);
    const Buffer& buf = p_.buffers[c.buffer];
    std::vector<Expr> idx;
    for (size_t d = 0; d < c.sizes.size(); ++d) {
      if (static_cast<int>(d) == c.scan_dim) idx.push_back(var(c.reduce_vars[0]));
      else idx.push_back(c.vars[d] < 0 ? int_const(0) : var(c.vars[d]));
    }
    // A scatter-add stores where its indices say (ComputedBuffer::add_at).
    item.scatter_add = c.is_scatter_add();
    item.store_index = substitute(item.scatter_add ? c.add_at : strided_index(idx, buf.strides, 0), sub);

    // Reads of this kernel's own buffers decide the earliest legal stage.
    int min_stage = 0;
    const bool splits_apart = opts_.separate_dependent_columns && vector && item.is_reduction &&
                              product(k.outer).hint() <= opts_.few_rows && product(inner).hint() > opts_.long_row_work;
    bool legal = true;
    std::function<void(const Expr&)> check = [&](const Expr& e) {
      if (!legal) return;
      if (e->op == ExprOp::Load) {
        const Where& w = where_[e->ival];
        if (w.kernel == ki && position_[e->ival] == pos) {
          const Stage& st = k.stages[w.stage];
          const KernelItem& producer = st.items[w.item];
          if (!same_index(e->args[0], producer.store_index)) {
            legal = false;
            return;
          }
          if ((st.vector_reduce || producer.is_reduction) && splits_apart) {
            legal = false;  // FuseOptions::separate_dependent_columns
            return;
          }
          if (st.vector_reduce) {
            // Readable only as acc[i0] by stages looping over the same kept dim.
            if (inner.empty() || inner[0] != st.inner[0]) legal = false;
            min_stage = std::max(min_stage, w.stage + 1);
          } else if (producer.is_reduction) {
            min_stage = std::max(min_stage, w.stage + 1);
          } else if (!st.inner.empty()) {
            // A pointwise element with inner loops is only addressable with the same loops.
            if (st.inner != inner) legal = false;
            min_stage = std::max(min_stage, w.stage);
          } else {
            min_stage = std::max(min_stage, w.stage);
          }
        }
      }
      for (const auto& a : e->args) check(a);
    };
    check(item.value);
    if (!legal) return false;
    // A pointwise item reading a same-shaped pointwise item from an earlier stage
    // could share that stage; any stage from min_stage on with equal inner works.
    int stage = -1;
    for (int s = min_stage; s < static_cast<int>(k.stages.size()); ++s)
      if (k.stages[s].inner == inner && k.stages[s].vector_reduce == vector) {
        stage = s;
        break;
      }
    // Keep reductions that read pointwise items of the same stage legal: the
    // pointwise item comes earlier in the stage, so its local is ready.
    if (stage < 0) {
      k.stages.push_back(Stage{inner, {}, vector});
      stage = static_cast<int>(k.stages.size()) - 1;
    }
    k.stages[stage].items.push_back(std::move(item));
    where_[c.buffer] = Where{ki, stage, static_cast<int>(k.stages[stage].items.size()) - 1};
    position_[c.buffer] = pos;
    return true;
  }


  const Program& p_;
  FuseOptions opts_;
  Schedule s_;
  std::vector<int> position_;   // per buffer: schedule step that produces it
  std::vector<Where> where_;    // per buffer: kernel/stage/item that computes it
};

}  // namespace

Schedule fuse(const Program& p, const FuseOptions& opts) { return Fuser(p, opts).run(); }

}  // namespace ember
