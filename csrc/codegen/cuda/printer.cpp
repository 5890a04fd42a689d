#include "codegen/cuda/printer.h"

#include <sstream>
#include <unordered_map>

#include "ir/size_expr.h"

namespace ember {

std::string CudaPrinter::signature(const std::string& fname, uint32_t block, const std::vector<int>& args,
                                   int min_blocks) {
  std::unordered_map<int, CEmitter::BufferRef> refs;
  std::ostringstream head;
  head << "extern \"C\" __global__ void __launch_bounds__(" << block;
  if (min_blocks > 0) head << ", " << min_blocks;
  head << ") " << fname << "(";
  for (size_t i = 0; i < args.size(); ++i) {
    int b = args[i];
    std::string name = "b" + std::to_string(b);
    if (b == ks.scratch) {
      head << (i ? ", " : "") << "unsigned char* __restrict__ " << name;
      scratch_name = name;
      continue;
    }
    const Buffer& buf = p.buffers[b];
    bool written = buf.kind == Buffer::Kind::Computed && m.producer[b].kernel == ki;
    head << (i ? ", " : "") << (written ? "" : "const ") << dtype_c_type(buf.dtype) << "* __restrict__ " << name;
    refs[b] = {name, buf.dtype, buf.extent()};
  }
  if (p.num_symbols > 0) head << (args.empty() ? "" : ", ") << "const ember_syms sym";
  head << ") {\n";
  em = std::make_unique<CEmitter>(refs);
  em->set_taken_arm_loads(true);
  if (statistics) em->set_statistics(*statistics);
  return head.str();
}

std::string CudaPrinter::function(const std::string& head, const std::vector<std::string>& body) const {
  std::ostringstream os;
  os << head;
  for (const auto& l : em->function_lines()) os << "  " << l << "\n";
  for (const auto& l : body) os << "  " << l << "\n";
  os << "}\n";
  return os.str();
}

std::string CudaPrinter::size_text(const Dim& d) const {
  return d.is_static() ? std::to_string(d.hint()) : em->emit(d.expr());
}

std::vector<std::string> CudaPrinter::decompose_dims(const std::string& flat, const Dims& sizes,
                                                     const std::string& prefix, size_t first) const {
  if (!is_symbolic(sizes)) return decompose(flat, hints(sizes), prefix, first);
  std::vector<std::string> lines(sizes.size());
  std::string stride;  // the product of the sizes after d; empty: 1
  for (size_t d = sizes.size(); d-- > 0;) {
    std::string q = stride.empty() ? flat : "(" + flat + " / (" + stride + "))";
    std::string v = d == 0 ? q : q + " % " + size_text(sizes[d]);
    lines[d] = "const int64_t " + prefix + std::to_string(first + d) + " = (int64_t)(" + v + ");";
    stride = stride.empty() ? size_text(sizes[d]) : stride + " * " + size_text(sizes[d]);
  }
  return lines;
}

std::vector<std::pair<int, std::string>> CudaPrinter::outer_vars() const {
  std::vector<std::pair<int, std::string>> v;
  for (size_t d = 0; d < k.outer.size(); ++d) v.push_back({outer_var(static_cast<int>(d)), "o" + std::to_string(d)});
  return v;
}

std::vector<std::pair<int, std::string>> CudaPrinter::inner_vars(const Stage& st) const {
  std::vector<std::pair<int, std::string>> v;
  for (size_t d = 0; d < st.inner.size(); ++d) v.push_back({inner_var(static_cast<int>(d)), "i" + std::to_string(d)});
  return v;
}

void CudaPrinter::pin_own_loads() {
  for (const auto& stage : k.stages)
    for (const auto& item : stage.items) em->set_min_load_level(p.computed[item.computed].buffer, em->depth());
}

std::vector<bool> statistic_buffers(const Program& p) {
  std::vector<bool> statistic(p.buffers.size(), false);
  for (const Step& step : p.steps) {
    if (step.kind != Step::Kind::Compute) continue;
    const ComputedBuffer& c = p.computed[step.index];
    bool derived = c.is_reduction;
    for (int b : loaded_buffers(c.body)) derived = derived || statistic[b];
    statistic[c.buffer] = derived;
  }
  return statistic;
}

std::vector<std::string> decompose(const std::string& flat, const std::vector<int64_t>& sizes, const std::string& prefix,
                                   size_t first) {
  std::vector<std::string> lines(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    std::string q = stride == 1 ? flat : "(" + flat + " / " + std::to_string(stride) + ")";
    std::string v = d == 0 ? q : q + " % " + std::to_string(sizes[d]);
    lines[d] = "const int64_t " + prefix + std::to_string(first + d) + " = (int64_t)(" + v + ");";
    stride *= sizes[d];
  }
  return lines;
}

}  // namespace ember
