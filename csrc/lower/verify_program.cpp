#include "lower/verify_program.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace ember {

namespace {

class ProgramChecker {
 public:
  ProgramChecker(const Program& p, const std::string& after) : p_(p), after_(after) {}

  void check() {
    buffers();
    computed();
    steps();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::logic_error("ember: invalid program after " + after_ + ": " + what);
  }
  std::string buf(int b) const { return "buf" + std::to_string(b); }
  bool valid(int b) const { return b >= 0 && static_cast<size_t>(b) < p_.buffers.size(); }

  void buffers() {
    if (p_.num_symbols != static_cast<int>(p_.symbol_hints.size())) fail("num_symbols differs from the symbols' hints");
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const Buffer& b = p_.buffers[i];
      if (b.id != static_cast<int>(i)) fail("buffer " + std::to_string(i) + " has id " + std::to_string(b.id));
      if (b.sizes.size() != b.strides.size()) fail(buf(b.id) + ": sizes and strides differ in rank");
      if (b.kind == Buffer::Kind::Input && b.input_index < 0) fail(buf(b.id) + ": an input without its index");
      if (b.kind == Buffer::Kind::Extern) {
        const bool call = b.extern_call >= 0 && static_cast<size_t>(b.extern_call) < p_.externs.size();
        const auto& outs = call ? p_.externs[b.extern_call].output_buffers : std::vector<int>{};
        if (!call || b.extern_output < 0 || static_cast<size_t>(b.extern_output) >= outs.size() ||
            outs[b.extern_output] != b.id)
          fail(buf(b.id) + ": not the output of the extern call it names");
      }
    }
  }

  void vars_of(const Expr& e, std::set<int>& out) const {
    if (e->op == ExprOp::Var) out.insert(static_cast<int>(e->ival));
    for (const auto& a : e->args) vars_of(a, out);
  }

  void computed() {
    std::vector<int> producer(p_.buffers.size(), -1);
    for (size_t i = 0; i < p_.computed.size(); ++i) {
      const ComputedBuffer& c = p_.computed[i];
      if (!valid(c.buffer)) fail("computed entry " + std::to_string(i) + " names no buffer");
      const Buffer& b = p_.buffers[c.buffer];
      const std::string name = buf(c.buffer);
      if (b.kind != Buffer::Kind::Computed) fail(name + " is computed but not a computed buffer");
      if (producer[c.buffer] >= 0) fail(name + " is computed twice");
      producer[c.buffer] = static_cast<int>(i);
      if (!c.is_scatter_add() && !(c.sizes == b.sizes)) fail(name + ": the computed sizes differ from the buffer's");
      if (c.is_scatter_add() && (c.is_reduction || b.dtype != DType::F32))
        fail(name + ": a scatter-add must be pointwise, into f32 (its atomic adds)");
      if (c.vars.size() != c.sizes.size()) fail(name + ": one var per dim expected");
      std::vector<int> order = c.iter_order;
      std::sort(order.begin(), order.end());
      for (size_t d = 0; d < order.size(); ++d)
        if (order[d] != static_cast<int>(d)) fail(name + ": the loop order is not a permutation of its dims");
      if (order.size() != c.sizes.size()) fail(name + ": the loop order is not a permutation of its dims");
      if (c.reduce_vars.size() != c.reduce_sizes.size()) fail(name + ": one reduce var per reduced dim expected");
      if (!c.is_reduction && (!c.reduce_sizes.empty() || c.scan_dim >= 0)) fail(name + ": reduced dims without a reduction");
      if (c.scan_dim >= static_cast<int>(c.sizes.size())) fail(name + ": scans a dim it does not have");
      if (!c.body) fail(name + ": no body");
      std::set<int> own(c.vars.begin(), c.vars.end()), used;
      own.insert(c.reduce_vars.begin(), c.reduce_vars.end());
      vars_of(c.body, used);
      if (c.is_scatter_add()) vars_of(c.add_at, used);
      for (int v : used)
        if (!own.count(v) || v >= p_.num_vars) fail(name + ": its body uses v" + std::to_string(v) + ", not its own var");
      if (c.is_scatter_add() && c.add_at->dtype != DType::I64) fail(name + ": a scatter-add's offset is not i64");
      walk_loads(c.body, [&](const Expr& e) {
        if (!valid(static_cast<int>(e->ival))) fail(name + " reads " + buf(static_cast<int>(e->ival)) + ", no buffer");
        if (p_.buffers[e->ival].dtype != e->dtype) fail(name + " loads " + buf(static_cast<int>(e->ival)) + " as another dtype");
      });
    }
  }

  // Every step reads only what earlier steps (or the caller) made.
  void steps() {
    std::vector<bool> ready(p_.buffers.size(), false), stepped(p_.computed.size(), false), called(p_.externs.size(), false);
    for (const auto& b : p_.buffers) ready[b.id] = b.kind == Buffer::Kind::Input;
    auto read = [&](int b, const std::string& by) {
      if (!valid(b)) fail(by + " reads " + buf(b) + ", no buffer");
      if (!ready[b]) fail(by + " reads " + buf(b) + " before a step computes it");
    };
    for (const auto& s : p_.steps) {
      if (s.kind == Step::Kind::Extern) {
        if (s.index < 0 || static_cast<size_t>(s.index) >= p_.externs.size() || called[s.index])
          fail("extern step " + std::to_string(s.index) + " is not a call, or runs twice");
        called[s.index] = true;
        const ExternCall& e = p_.externs[s.index];
        if (e.tensor_args.size() != e.tensor_views.size()) fail("extern " + e.op + ": one view per tensor argument expected");
        for (const auto& v : e.tensor_views) read(v.buffer, "extern " + e.op);
        for (int a : e.prepared_args)
          if (a < 0 || static_cast<size_t>(a) >= e.tensor_views.size() || !p_.is_whole_input(e.tensor_views[a]))
            fail("extern " + e.op + ": prepared argument " + std::to_string(a) + " is not a graph input as passed");
        for (const auto& pa : e.padded_args)
          if (pa.arg < 0 || static_cast<size_t>(pa.arg) >= e.tensor_views.size() ||
              p_.buffers[e.tensor_views[pa.arg].buffer].kind != Buffer::Kind::Input ||
              pa.sizes.size() != e.tensor_views[pa.arg].sizes.size() || pa.strides.size() != pa.sizes.size())
            fail("extern " + e.op + ": padded argument " + std::to_string(pa.arg) + " is not a view of a graph input");
        for (int b : e.output_buffers)
          if (b >= 0) ready[b] = true;
        continue;
      }
      if (s.index < 0 || static_cast<size_t>(s.index) >= p_.computed.size() || stepped[s.index])
        fail("compute step " + std::to_string(s.index) + " is not a computed entry, or runs twice");
      stepped[s.index] = true;
      const ComputedBuffer& c = p_.computed[s.index];
      walk_loads(c.body, [&](const Expr& e) { read(static_cast<int>(e->ival), buf(c.buffer)); });
      if (c.is_scatter_add()) walk_loads(c.add_at, [&](const Expr& e) { read(static_cast<int>(e->ival), buf(c.buffer)); });
      ready[c.buffer] = true;
    }
    for (size_t i = 0; i < called.size(); ++i)
      if (!called[i]) fail("extern call " + std::to_string(i) + " (" + p_.externs[i].op + ") is in no step");
    for (const auto& o : p_.outputs)
      if (o.is_tensor) read(o.view.buffer, "an output");
  }

  const Program& p_;
  const std::string& after_;
};

}  // namespace

void verify_program(const Program& p, const std::string& after_pass) { ProgramChecker(p, after_pass).check(); }

}  // namespace ember
