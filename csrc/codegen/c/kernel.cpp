#include "codegen/c/kernel.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "codegen/c/kernel_printer.h"
#include "codegen/c_prelude.h"

namespace ember {

namespace {

// GCC vectorizes an `omp simd` loop whose loads step by many elements per iteration (an
// NCHW tensor read along its channels, into a channels-last buffer) as one interleaved
// group as wide as the step: thousands of permutes, seconds to compile and, at a step of
// 1,024, 60x slower than the scalar loop (a 2x2 max-pool into channels-last: 5.6 ms
// against 93 us). Measured on loops of such loads: a step of 8 gains from the pragma,
// 32 is even, 128 loses 3x. A loop with a step beyond 32 runs without it.
constexpr int64_t kMaxSimdStep = 32;

// Whether e loads with a step beyond kMaxSimdStep elements along `var`.
bool steps_wide(const Expr& e, int var, std::unordered_set<const ExprNode*>& seen) {
  if (!seen.insert(e.get()).second) return false;
  if (e->op == ExprOp::Load) {
    std::optional<int64_t> step = coefficient(e->args[0], var);
    if (step && (*step > kMaxSimdStep || *step < -kMaxSimdStep)) return true;
  }
  for (const auto& a : e->args)
    if (steps_wide(a, var, seen)) return true;
  return false;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

std::string KernelPrinter::print(KernelInfo& info) {
  info.name = k_.name;
  info.rows = k_.outer_numel();
  info.work_per_row = std::max<int64_t>(1, k_.work_per_row());
  // Arguments: every buffer the kernel reads from memory or stores.
  std::set<int> args;
  for (size_t st = 0; st < k_.stages.size(); ++st)
    for (const auto& item : k_.stages[st].items) {
      int b = p_.computed[item.computed].buffer;
      if (m_.in_memory[b]) args.insert(b);
      std::function<void(const Expr&)> walk = [&](const Expr& e) {
        if (e->op == ExprOp::Load && !read_is_local(m_.producer[e->ival], s_, ki_, static_cast<int>(st), VectorResults::Local)) args.insert(static_cast<int>(e->ival));
        for (const auto& a : e->args) walk(a);
      };
      walk(item.value);
      for (int o : p_.computed[item.computed].origins) origins_.insert(o);
    }
  info.args.assign(args.begin(), args.end());
  info.origins.assign(origins_.begin(), origins_.end());

  std::unordered_map<int, CEmitter::BufferRef> refs;
  std::ostringstream head;
  head << "void " << k_.name << "(int64_t begin, int64_t end, char* const* args) {\n";
  head << "  EMBER_EXP_BOUNDS\n";
  if (p_.num_symbols > 0)
    head << "  const int64_t* restrict sym = (const int64_t*)args[" << info.args.size() << "];\n";
  for (size_t i = 0; i < info.args.size(); ++i) {
    int b = info.args[i];
    const Buffer& buf = p_.buffers[b];
    // Named by position, not buffer id: kernels that differ only in which buffers
    // they take print the same text, and generate_c keeps one of them.
    std::string name = "a" + std::to_string(i);
    bool written = buf.kind == Buffer::Kind::Computed && m_.producer[b].kernel == ki_;
    head << "  " << (written ? "" : "const ") << dtype_c_type(buf.dtype) << "* restrict " << name << " = ("
         << (written ? "" : "const ") << dtype_c_type(buf.dtype) << "*)args[" << i << "];\n";
    refs[b] = {name, buf.dtype, buf.extent()};
  }
  em_ = std::make_unique<CEmitter>(refs);

  precompute_row_invariants(info);
  precompute_row_buffers();

  // Row scope: decompose the flat row index into outer coordinates.
  std::vector<std::pair<int, std::string>> outer_vars;
  for (size_t d = 0; d < k_.outer.size(); ++d) outer_vars.push_back({outer_var(static_cast<int>(d)), "o" + std::to_string(d)});
  em_->open_scope(outer_vars);
  const std::vector<std::string> coords = row_coordinates("x");
  for (size_t d = 0; d < k_.outer.size(); ++d) em_->line("const int64_t o" + std::to_string(d) + " = " + coords[d] + ";");
  print_row_prefetch();
  // Loads of buffers this kernel writes are valid only after the stage that
  // writes them, so they may be hoisted to the row scope but no further.
  for (const auto& stage : k_.stages)
    for (const auto& item : stage.items) em_->set_min_load_level(p_.computed[item.computed].buffer, em_->depth());
  for (size_t st = 0; st < k_.stages.size(); ++st) print_stage(static_cast<int>(st));
  std::vector<std::string> row = em_->close_scope();

  std::ostringstream os;
  os << head.str();
  for (const auto& l : em_->function_lines()) os << "  " << l << "\n";
  bool simd_rows = k_.stages.size() == 1 && k_.stages[0].inner.empty() && !stage_has_arg(k_.stages[0]);
  if (simd_rows) os << "  #pragma omp simd\n";
  os << "  for (int64_t x = begin; x < end; ++x) {\n";
  for (const auto& l : row) os << "    " << l << "\n";
  os << "  }\n}\n";
  return os.str();
}

std::vector<std::string> KernelPrinter::row_coordinates(const std::string& flat) {
  Dim stride = 1;
  std::vector<std::string> coords(k_.outer.size());
  for (size_t d = k_.outer.size(); d-- > 0;) {
    std::string q = stride == 1 ? flat : "(" + flat + " / " + dim_text(stride) + ")";
    coords[d] = d == 0 ? q : q + " % " + dim_text(k_.outer[d]);
    stride *= k_.outer[d];
  }
  return coords;
}

bool KernelPrinter::loads_step_wide(const Stage& st, int var) const {
  std::unordered_set<const ExprNode*> seen;
  for (const auto& it : st.items)
    if (steps_wide(it.value, var, seen)) return true;
  return false;
}

bool KernelPrinter::stage_has_arg(const Stage& st) const {
  for (const auto& it : st.items) {
    const auto& c = p_.computed[it.computed];
    if (it.is_scan) return true;
    if (c.is_arg_reduction()) return true;
  }
  return false;
}

std::string KernelPrinter::dim_text(const Dim& d) {
  return d.is_static() ? std::to_string(d.hint()) + "LL" : em_->emit(d.expr());
}

std::string KernelPrinter::flat_index(const Stage& stage) {
  Dim stride = 1;
  std::string flat;
  for (size_t d = stage.inner.size(); d-- > 0;) {
    std::string term = "i" + std::to_string(d) + (stride == 1 ? "" : " * " + dim_text(stride));
    flat = flat.empty() ? term : term + " + " + flat;
    stride *= stage.inner[d];
  }
  return flat.empty() ? "0" : flat;
}

GeneratedCode generate_c(const Program& p, const Schedule& s) {
  GeneratedCode out;
  Placement m = place_buffers(p, s, VectorResults::Local);
  std::ostringstream os;
  os << c_prelude() << "\n";
  // Kernel text (launcher included) with its name as "@" -> the function that has it.
  std::unordered_map<std::string, std::string> printed;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    // The CPU target lowers no scatter-add (LowerOptions::atomic_scatter_add).
    if (s.kernels[k].scatter_adds()) throw std::logic_error("ember: C codegen has no scatter-add (kernel " + s.kernels[k].name + ")");
    KernelInfo info;
    std::ostringstream text;
    text << KernelPrinter(p, s, m, static_cast<int>(k)).print(info) << "\n";
    // The launcher splits rows over OpenMP threads (ember_launch_rows, in the prelude).
    // Loaded into a PyTorch process, libgomp.so.1 resolves to torch's own copy, so
    // kernels run on the same thread team as oneDNN and BLAS (hot, not competing for
    // cores), as Inductor's do.
    bool split = false;
    for (const auto& st : s.kernels[k].stages) split |= st.split > 1;
    text << "void " << info.name << "_launch(int64_t rows, int64_t grain, char* const* args) { ember_launch_rows("
         << info.name << ", rows, grain, " << (split ? 1 : 0) << ", args); }\n\n";
    // Kernels that differ only in their buffers (a model's repeated layers) share one
    // function: less for the C compiler, the same machine code.
    auto [first, fresh] = printed.emplace(replace_all(text.str(), info.name, "@"), info.name);
    out.kernel_begin.push_back(static_cast<size_t>(os.tellp()));
    os << "/* " << info.name << ":";
    for (size_t a = 0; a < info.args.size(); ++a) os << " a" << a << "=buf" << info.args[a];
    if (!fresh) os << "; runs " << first->second;
    os << " */\n";
    if (fresh) os << text.str();
    info.function = first->second;
    out.kernels.push_back(std::move(info));
  }
  out.source = os.str();
  out.buffer_in_memory = m.in_memory;
  return out;
}

}  // namespace ember
