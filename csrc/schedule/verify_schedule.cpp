#include "schedule/verify_schedule.h"

#include <set>
#include <stdexcept>

namespace ember {

namespace {

struct Where {
  int step = -1, kernel = -1, stage = -1;
  bool reduction = false;
};

class ScheduleChecker {
 public:
  ScheduleChecker(const Schedule& s, const Program& p, const std::string& after) : s_(s), p_(p), after_(after) {}

  void check() {
    steps();
    items();
    reads();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::logic_error("ember: invalid schedule after " + after_ + ": " + what);
  }

  void steps() {
    std::vector<int> kernels(s_.kernels.size(), 0);
    std::vector<int> externs;
    for (const auto& st : s_.steps) {
      const bool kernel = st.kind == Schedule::Step::Kind::Kernel;
      const size_t n = kernel ? s_.kernels.size() : p_.externs.size();
      if (st.index < 0 || static_cast<size_t>(st.index) >= n) fail("a step names no kernel or extern call");
      if (kernel) ++kernels[st.index];
      else externs.push_back(st.index);
    }
    for (size_t k = 0; k < kernels.size(); ++k)
      if (kernels[k] != 1) fail("kernel " + s_.kernels[k].name + " is not run exactly once");
    std::vector<int> program_externs;
    for (const auto& st : p_.steps)
      if (st.kind == Step::Kind::Extern) program_externs.push_back(st.index);
    if (externs != program_externs) fail("extern calls missing, repeated or reordered");
  }

  void items() {
    std::vector<bool> stepped(p_.computed.size(), false);
    for (const auto& st : p_.steps)
      if (st.kind == Step::Kind::Compute) stepped[st.index] = true;
    where_.assign(p_.buffers.size(), Where{});
    for (size_t si = 0; si < s_.steps.size(); ++si) {
      if (s_.steps[si].kind != Schedule::Step::Kind::Kernel) continue;
      const int ki = s_.steps[si].index;
      const Kernel& k = s_.kernels[ki];
      for (size_t sti = 0; sti < k.stages.size(); ++sti) {
        const Stage& st = k.stages[sti];
        bool reduction = false, scan = false;
        for (const auto& item : st.items) {
          if (item.computed < 0 || static_cast<size_t>(item.computed) >= p_.computed.size() || !stepped[item.computed])
            fail("kernel " + k.name + " computes an entry no step of the program computes");
          const ComputedBuffer& c = p_.computed[item.computed];
          const std::string name = "buf" + std::to_string(c.buffer);
          if (where_[c.buffer].kernel >= 0) fail(name + " is computed by two items");
          where_[c.buffer] = {static_cast<int>(si), ki, static_cast<int>(sti), item.is_reduction};
          if (item.is_scan != (c.scan_dim >= 0) || item.is_reduction != (c.is_reduction && c.scan_dim < 0))
            fail(name + ": its item's reduction or scan flag is not its buffer's");
          if (st.vector_reduce && !item.is_reduction) fail(name + ": a vector stage holds reductions only");
          if (item.scatter_add != c.is_scatter_add()) fail(name + ": its item's scatter-add flag is not its buffer's");
          if (item.scatter_add && (k.stages.size() != 1 || st.items.size() != 1))
            fail(name + ": a scatter-add shares kernel " + k.name);
          reduction |= item.is_reduction;
          scan |= item.is_scan;
          loop_vars(item.value, k, st, name);
          loop_vars(item.store_index, k, st, name);
        }
        if (st.split > 1 && (!reduction || scan)) fail("kernel " + k.name + ": a split stage needs a reduction and no scan");
      }
    }
    for (size_t c = 0; c < p_.computed.size(); ++c)
      if (stepped[c] && where_[p_.computed[c].buffer].kernel < 0)
        fail("buf" + std::to_string(p_.computed[c].buffer) + " is in no kernel");
  }

  void loop_vars(const Expr& e, const Kernel& k, const Stage& st, const std::string& name) const {
    if (e->op == ExprOp::Var) {
      const int64_t v = e->ival;
      const bool outer = v >= kOuterVarBase && v < kInnerVarBase && v - kOuterVarBase < static_cast<int64_t>(k.outer.size());
      const bool inner = v >= kInnerVarBase && v - kInnerVarBase < static_cast<int64_t>(st.inner.size());
      if (!outer && !inner) fail(name + " in kernel " + k.name + " uses a var outside its loops");
    }
    for (const auto& a : e->args) loop_vars(a, k, st, name);
  }

  void reads() {
    for (size_t si = 0; si < s_.steps.size(); ++si) {
      if (s_.steps[si].kind != Schedule::Step::Kind::Kernel) continue;
      const Kernel& k = s_.kernels[s_.steps[si].index];
      for (size_t sti = 0; sti < k.stages.size(); ++sti)
        for (const auto& item : k.stages[sti].items)
          walk_loads(item.value, [&](const Expr& e) {
            const Where& w = where_[e->ival];
            if (w.kernel < 0) return;  // an input, an extern's result
            const std::string what = "buf" + std::to_string(p_.computed[item.computed].buffer) + " reads buf" +
                                     std::to_string(e->ival);
            if (w.step > static_cast<int>(si)) fail(what + ", which a later kernel computes");
            if (w.step == static_cast<int>(si) &&
                (w.stage > static_cast<int>(sti) || (w.stage == static_cast<int>(sti) && w.reduction)))
              fail(what + " before its stage has computed it");
          });
    }
  }

  const Schedule& s_;
  const Program& p_;
  const std::string& after_;
  std::vector<Where> where_;  // per buffer: the item that computes it
};

}  // namespace

void verify_schedule(const Schedule& s, const Program& p, const std::string& after_pass) {
  ScheduleChecker(s, p, after_pass).check();
}

}  // namespace ember
