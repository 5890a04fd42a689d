#include "codegen/cuda_kernel.h"

#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>

#include "codegen/cuda_column_split.h"
#include "codegen/cuda_elementwise.h"
#include "codegen/cuda_launch.h"
#include "codegen/cuda_prelude.h"
#include "codegen/cuda_printer.h"
#include "codegen/cuda_reduction.h"
#include "codegen/cuda_row.h"
#include "codegen/cuda_row_tile.h"
#include "codegen/cuda_transpose.h"
#include "codegen/cuda_vector_path.h"
#include "codegen/placement.h"
#include "ir/size_expr.h"

namespace ember {

namespace {

// Throws CudaUnsupported, naming the kernel and the construct, for what this printer
// cannot express yet.
void refuse_unsupported(const Kernel& k, const Program& p) {
  auto refuse = [&](const std::string& what) {
    throw CudaUnsupported("CUDA codegen does not handle " + what + " yet (kernel " + k.name + ")");
  };
  // A graph with symbols prints the general forms (cuda_kernel.h), which read symbolic
  // sizes as expressions over `sym`; the planners of the other forms need static sizes.
  if (p.num_symbols > kMaxCudaSymbols)
    refuse("more than " + std::to_string(kMaxCudaSymbols) + " symbols (" + std::to_string(p.num_symbols) + ")");
  for (const auto& st : k.stages) {
    if (st.split > 1) refuse("split reduction stages");
    // A vector stage's lanes are sized at compile time (fuse.cpp keeps its kept dim static).
    if (st.vector_reduce && (st.inner.empty() || !st.inner[0].is_static())) refuse("a vector stage of symbolic width");
    for (const auto& item : st.items)
      if (p.computed[item.computed].is_arg_reduction() && st.vector_reduce)
        refuse("arg-reductions across rows (argmax, argmin over an outer dim)");
  }
}

// The kernel's parameters (the buffers it stores to memory, and those it reads other
// than locally), in id order, and the graph nodes whose work it does.
void collect_args(const Program& p, const Schedule& s, const Placement& m, int ki, CudaKernelInfo& info) {
  std::set<int> args, writes, origins;
  const Kernel& k = s.kernels[ki];
  for (size_t st = 0; st < k.stages.size(); ++st)
    for (const auto& item : k.stages[st].items) {
      int b = p.computed[item.computed].buffer;
      if (m.in_memory[b]) {
        args.insert(b);
        writes.insert(b);
      }
      walk_loads(item.value, [&](const Expr& e) {
        if (!read_is_local(m.producer[e->ival], s, ki, static_cast<int>(st), VectorResults::InMemory))
          args.insert(static_cast<int>(e->ival));
      });
      for (int o : p.computed[item.computed].origins) origins.insert(o);
    }
  info.args.assign(args.begin(), args.end());
  info.writes.assign(writes.begin(), writes.end());
  info.origins.assign(origins.begin(), origins.end());
}

// Kernel `ki`'s source (and its partial launch's, for a column split): its launch, then
// each plan, then the body of its shape. Sets `scratch_bytes` to the bytes of scratch
// buffer `scratch_id` it uses (0: none).
std::string print_kernel(const Program& p, const Schedule& s, const Placement& m, int ki, int scratch_id,
                         CudaKernelInfo& info, int64_t& scratch_bytes, const LaunchChoice& choice = {},
                         const std::string& name = "") {
  const Kernel& k = s.kernels[ki];
  refuse_unsupported(k, p);
  info.name = name.empty() ? k.name : name;
  collect_args(p, s, m, ki, info);
  CudaPrinter pr(p, s, m, ki, scratch_id, choose_launch(p, k, m.in_memory, info, choice));
  // A graph with symbols: vector accesses and row tiles over static rows (symbolic
  // row counts), no hoisting or column splits (their grids are planned from sizes).
  VectorPlan vec = plan_vector(p, s, m, ki, pr.launch);
  RowTile tile = plan_row_tile(p, s, m, ki, pr.launch, info);
  ColumnSplit split;
  if (!pr.launch.symbolic) {
    plan_hoist(vec, p, s, m, ki, info);
    split = plan_column_split(p, s, m, ki, pr.launch, scratch_id, info);
  }
  scratch_bytes = split.scratch_bytes;

  std::string head = pr.signature(info.name, info.block, info.args, hoist_min_blocks(vec, info.block));
  std::vector<std::string> body;
  if (pr.launch.shape == CudaKernelInfo::Shape::Transpose) {
    body = transpose_body(*pr.launch.transpose, p, k, m.in_memory, *pr.em);
  } else if (pr.launch.shape == CudaKernelInfo::Shape::Elementwise) {
    body = elementwise_vector_body(pr, vec);
    std::vector<std::string> scalar = elementwise_body(pr);
    body.insert(body.end(), scalar.begin(), scalar.end());
  } else {
    body = row_body(pr, tile, split);
  }
  std::string text = pr.function(head, body);
  if (split.chunks > 0) text += "\n" + partial_kernel(pr, split, info);
  return text;
}

// What two kernels must share for one to run the other's compiled functions: their
// launch, and their text up to a renaming of buffers. The printer names a buffer's
// pointer b<id> and locals derived from it <prefix><id>[_n] (raw, row, kept, out, lane,
// sh, st); each such identifier whose id is one of the kernel's parameters becomes
// <prefix>#<its parameter position>, and the kernel's name becomes "@". The renaming is
// one-to-one ('#' is in no C identifier), so equal keys are the same program over
// parameters in the same order: alpha-equivalent, never merely similar.
std::string sharing_key(const std::string& text, const CudaKernelInfo& info) {
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < info.args.size(); ++i) position.emplace(std::to_string(info.args[i]), i);
  std::ostringstream key;
  key << info.grid << " " << info.block << " " << info.partial_grid << " " << info.partial_block << "\n";
  auto ident_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (!ident_char(text[i]) || std::isdigit(static_cast<unsigned char>(text[i]))) {
      // A number (a literal, or digits after '.') is copied whole: never an identifier.
      size_t j = i + 1;
      if (std::isdigit(static_cast<unsigned char>(text[i])))
        while (j < text.size() && ident_char(text[j])) ++j;
      key << text.substr(i, j - i);
      i = j;
      continue;
    }
    size_t j = i;
    while (j < text.size() && ident_char(text[j])) ++j;
    const std::string ident = text.substr(i, j - i);
    if (ident == info.name) {
      key << "@";
    } else if (ident.rfind(info.name + "_", 0) == 0) {
      key << "@" << ident.substr(info.name.size());  // <name>_partial
    } else {
      // <prefix><digits><rest>, the digits a parameter's buffer id.
      size_t p = 0;
      while (p < ident.size() && std::islower(static_cast<unsigned char>(ident[p]))) ++p;
      size_t d = p;
      while (d < ident.size() && std::isdigit(static_cast<unsigned char>(ident[d]))) ++d;
      static const std::set<std::string> prefixes = {"b", "raw", "row", "kept", "out", "lane", "sh", "st"};
      auto at = d > p ? position.find(ident.substr(p, d - p)) : position.end();
      if (at != position.end() && prefixes.count(ident.substr(0, p))) {
        key << ident.substr(0, p) << "#" << at->second << ident.substr(d);
      } else {
        key << ident;
      }
    }
    i = j;
  }
  return key.str();
}

}  // namespace

const char* cuda_shape_name(CudaKernelInfo::Shape s) {
  switch (s) {
    case CudaKernelInfo::Shape::Elementwise: return "elementwise";
    case CudaKernelInfo::Shape::Transpose: return "transpose";
    case CudaKernelInfo::Shape::RowWarp: return "row_warp";
    default: return "row_block";
  }
}

std::vector<CudaKernelVariant> generate_cuda_variants(const Program& p, const Schedule& s, int k) {
  Placement m = place_buffers(p, s, VectorResults::InMemory);
  const int no_scratch = static_cast<int>(p.buffers.size());
  CudaKernelInfo info;
  int64_t scratch = 0;
  const std::string text = print_kernel(p, s, m, k, no_scratch, info, scratch);
  std::vector<CudaKernelVariant> out;
  if (scratch > 0 || info.partial_grid > 0 || info.shape == CudaKernelInfo::Shape::Transpose) return out;
  // Kernels that print the same (up to their names) are one variant: a choice the rules
  // clamp back to the default, or two choices that meet.
  std::set<std::string> seen = {sharing_key(text, info)};
  CudaLaunch launch;
  launch.shape = info.shape;
  launch.symbolic = p.num_symbols > 0;
  launch.threads = static_cast<int>(info.block);
  for (const LaunchChoice& choice : launch_alternatives(launch)) {
    CudaKernelVariant v;
    v.choice_text = choice.text();
    const std::string name = s.kernels[k].name + "_t" + std::to_string(out.size() + 1);
    v.source = print_kernel(p, s, m, k, no_scratch, v.info, scratch, choice, name) + "\n";
    v.info.function = name;
    if (scratch > 0 || v.info.partial_grid > 0 || !seen.insert(sharing_key(v.source, v.info)).second) continue;
    out.push_back(std::move(v));
  }
  return out;
}

CudaCode generate_cuda(const Program& p, const Schedule& s) {
  CudaCode out;
  Placement m = place_buffers(p, s, VectorResults::InMemory);
  out.prelude = cuda_prelude() + "\n";
  out.source = out.prelude;
  // Kernel text (its partial launch's included) with its name as "@" -> the kernel
  // whose functions have it. A model's repeated layers print the same kernels; each is
  // compiled once (NVRTC's time goes per kernel).
  std::unordered_map<std::string, std::string> printed;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    CudaKernelInfo info;
    int64_t scratch = 0;
    const int scratch_id = static_cast<int>(p.buffers.size() + out.scratch_bytes.size());
    std::string text = print_kernel(p, s, m, static_cast<int>(k), scratch_id, info, scratch) + "\n";
    if (scratch > 0) out.scratch_bytes.push_back(scratch);
    auto [first, fresh] = printed.emplace(sharing_key(text, info), info.name);
    info.function = first->second;
    out.kernel_sources.push_back(fresh ? text : "/* " + info.name + ": runs " + info.function + " */\n");
    out.source += out.kernel_sources.back();
    out.kernels.push_back(std::move(info));
  }
  out.buffer_in_memory = m.in_memory;
  return out;
}

}  // namespace ember
