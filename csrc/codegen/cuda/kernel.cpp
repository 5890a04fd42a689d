#include "codegen/cuda/kernel.h"

#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>

#include "codegen/cuda/column_split.h"
#include "codegen/cuda/elementwise.h"
#include "codegen/cuda/prelude.h"
#include "codegen/cuda/printer.h"
#include "codegen/cuda/reduction.h"
#include "codegen/cuda/row.h"
#include "codegen/cuda/row_tile.h"
#include "codegen/cuda/scan_columns.h"
#include "codegen/cuda/transpose.h"
#include "codegen/cuda/vector_path.h"
#include "ir/size_expr.h"

namespace ember {

namespace {

// Kernel `ks`'s source (and its partial launch's, for a column split): its signature,
// then the body of its shape.
// `statistics`: statistic_buffers(p).
std::string print_kernel(const Program& p, const Schedule& s, const Placement& m, const CudaKernelSchedule& ks,
                         const std::vector<bool>& statistics) {
  const Kernel& k = s.kernels[ks.kernel];
  const CudaKernelInfo& info = ks.info;
  CudaPrinter pr(p, s, m, ks);
  pr.statistics = &statistics;
  std::string head = pr.signature(info.name, info.block, info.args, ks.min_blocks);
  std::vector<std::string> body;
  if (ks.launch.shape == CudaKernelInfo::Shape::Transpose) {
    body = transpose_body(*ks.launch.transpose, p, k, m.in_memory, *pr.em);
  } else if (ks.launch.shape == CudaKernelInfo::Shape::Elementwise) {
    body = elementwise_vector_body(pr, ks.vector);
    std::vector<std::string> scalar = elementwise_body(pr);
    body.insert(body.end(), scalar.begin(), scalar.end());
  } else if (ks.launch.shape == CudaKernelInfo::Shape::ScanColumns) {
    body = scan_columns_body(pr, ks.scan);
  } else {
    body = row_body(pr, ks.row_tile, ks.column_split);
  }
  std::string text = pr.function(head, body);
  if (ks.column_split.chunks > 0) text += "\n" + partial_kernel(pr, ks.column_split, info);
  if (k.scatter_adds()) text += "\n" + scatter_zeroing_kernel(pr);
  return text;
}

// What two kernels must share for one to run the other's compiled functions: their
// launch, and their text up to a renaming of buffers. The printer names a buffer's
// pointer b<id> and locals derived from it <prefix><id>[_n] (raw, row, kept, out, lane,
// sh, st); each such identifier whose id is one of the kernel's parameters becomes
// <prefix>#<its parameter position> (a value kept in registers only, which is none:
// #<args + its position among them>), and the kernel's name becomes "@". The renaming is
// one-to-one ('#' is in no C identifier), so equal keys are the same program over
// parameters in the same order: alpha-equivalent, never merely similar.
std::string sharing_key(const std::string& text, const CudaKernelInfo& info) {
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < info.args.size(); ++i) position.emplace(std::to_string(info.args[i]), i);
  for (size_t i = 0; i < info.row_unstored.size(); ++i)
    position.emplace(std::to_string(info.row_unstored[i]), info.args.size() + i);
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

std::vector<CudaKernelVariant> generate_cuda_variants(const Program& p, const Schedule& s, const CudaSchedule& cs,
                                                      int k) {
  const CudaKernelSchedule& rules = cs.kernels[k];
  std::vector<CudaKernelVariant> out;
  // A scatter-add's launches add into its buffer: timing them again would need it zeroed
  // between runs, and its one launch geometry has nothing to choose.
  if (rules.scratch >= 0 || rules.info.shape == CudaKernelInfo::Shape::Transpose || s.kernels[k].scatter_adds())
    return out;
  // Kernels that print the same (up to their names) are one variant: a choice the rules
  // clamp back to the default, or two choices that meet.
  const std::vector<bool> statistics = statistic_buffers(p);
  std::set<std::string> seen = {sharing_key(print_kernel(p, s, cs.placement, rules, statistics), rules.info)};
  const int no_scratch = static_cast<int>(p.buffers.size());
  for (const LaunchChoice& choice : launch_alternatives(rules.launch)) {
    CudaKernelSchedule ks = schedule_cuda_kernel(p, s, cs.placement, k, choice, no_scratch);
    // Values the rules keep in registers only are in no memory: a launch whose tile
    // does not keep them (a block per row, other threads) cannot run.
    if (ks.scratch >= 0 || !tile_keeps_unstored(p, s, cs.placement, k, ks.row_tile)) continue;
    ks.info.name = s.kernels[k].name + "_t" + std::to_string(out.size() + 1);
    ks.info.function = ks.info.name;
    CudaKernelVariant v{choice.text(), print_kernel(p, s, cs.placement, ks, statistics) + "\n", ks.info};
    if (!seen.insert(sharing_key(v.source, v.info)).second) continue;
    out.push_back(std::move(v));
  }
  return out;
}

CudaCode generate_cuda(const Program& p, const Schedule& s, const CudaSchedule& cs) {
  CudaCode out;
  out.prelude = cuda_prelude() + "\n";
  out.source = out.prelude;
  // Kernel text (its partial launch's included) with its name as "@" -> the kernel
  // whose functions have it. A model's repeated layers print the same kernels; each is
  // compiled once (NVRTC's time goes per kernel).
  std::unordered_map<std::string, std::string> printed;
  const std::vector<bool> statistics = statistic_buffers(p);
  for (const CudaKernelSchedule& ks : cs.kernels) {
    CudaKernelInfo info = ks.info;
    std::string text = print_kernel(p, s, cs.placement, ks, statistics) + "\n";
    auto [first, fresh] = printed.emplace(sharing_key(text, info), info.name);
    info.function = first->second;
    out.kernel_sources.push_back(fresh ? text : "/* " + info.name + ": runs " + info.function + " */\n");
    out.source += out.kernel_sources.back();
    out.kernels.push_back(std::move(info));
  }
  out.buffer_in_memory = cs.placement.in_memory;
  return out;
}

}  // namespace ember
