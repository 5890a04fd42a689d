#include "schedule/name_kernels.h"

#include <cctype>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ember {

namespace {

// An op's part of a name is at most this long: a name stays readable in a trace's column.
constexpr size_t kMaxOpChars = 24;

// Ops that only move or relabel data, or make constants: a kernel that does anything else
// is named after that.
bool says_little(const std::string& op) {
  static const std::unordered_set<std::string> ops = {
      "view", "_unsafe_view", "reshape", "_reshape_alias", "expand", "expand_as", "view_as", "permute",
      "transpose", "t", "clone", "contiguous", "_to_copy", "to", "copy", "copy_", "squeeze", "unsqueeze",
      "slice", "select", "as_strided", "alias", "detach", "lift_fresh_copy", "convert_element_type",
      "flatten", "unflatten", "narrow", "split", "split_with_sizes", "unbind",
      "full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "new_full",
      "new_zeros", "new_ones", "new_empty", "scalar_tensor", "fill", "iota", "arange"};
  return ops.count(op) > 0;
}

// Plain arithmetic, comparisons and selects: named after the ops that say more.
bool plain_arithmetic(const std::string& op) {
  static const std::unordered_set<std::string> ops = {
      "add", "sub", "rsub", "mul", "div", "neg", "where", "eq", "ne", "lt", "le", "gt", "ge", "maximum",
      "minimum", "clamp", "clamp_min", "clamp_max", "abs", "sign", "masked_fill", "remainder", "fmod",
      "floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and", "logical_or",
      "logical_not", "logical_xor"};
  return ops.count(op) > 0;
}

// "aten.var_mean.correction" -> "var_mean": the op without its namespace and overload.
std::string bare_op(const std::string& overload) {
  const size_t first = overload.find('.');
  if (first == std::string::npos) return overload;
  const size_t last = overload.rfind('.');
  return last == first ? overload.substr(first + 1) : overload.substr(first + 1, last - first - 1);
}

// Letters, digits and single '_' between them, at most `limit` characters.
std::string identifier_part(const std::string& text, size_t limit) {
  std::string out;
  for (char c : text) {
    const bool word = std::isalnum(static_cast<unsigned char>(c));
    if (word) out += c;
    else if (!out.empty() && out.back() != '_') out += '_';
    if (out.size() >= limit) break;
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// The kind of kernel k: its stages' work, and on CUDA whether its rows stay in registers.
std::string kernel_kind(const Kernel& k, const CudaKernelSchedule* ks) {
  bool reduces = false, scans = false;
  for (const auto& st : k.stages)
    for (const auto& item : st.items) {
      reduces |= item.is_reduction;
      scans |= item.is_scan;
    }
  if (scans) return "scan";
  if (!reduces) return "poi";
  return ks && ks->info.row_slots > 0 ? "per" : "red";
}

}  // namespace

std::string short_kernel_name(int index) { return "ember_k" + std::to_string(index); }

std::string descriptive_kernel_name(const std::string& kind, const std::vector<std::string>& ops, int index) {
  std::vector<std::string> distinct;
  std::set<std::string> seen;
  for (const auto& overload : ops) {
    std::string op = bare_op(overload);
    if (!op.empty() && seen.insert(op).second) distinct.push_back(op);
  }
  // What the kernel computes, if anything; else what it moves or makes.
  std::vector<std::string> telling, plain, quiet;
  for (const auto& op : distinct)
    (says_little(op) ? quiet : plain_arithmetic(op) ? plain : telling).push_back(op);
  std::vector<std::string> named = telling;
  named.insert(named.end(), plain.begin(), plain.end());
  if (named.empty()) named = quiet;

  std::string name = "ember_" + kind;
  int shown = 0;
  size_t next = 0;
  for (; next < named.size() && shown < kMaxNamedOps; ++next) {
    const std::string part = identifier_part(named[next], kMaxOpChars);
    if (part.empty()) continue;
    name += "_" + part;
    ++shown;
  }
  if (shown == 0) name += "_copy";
  if (next < named.size()) name += "_plus" + std::to_string(named.size() - next);
  return name + "_" + std::to_string(index);
}

void name_kernels(Schedule& s, const Program& p, const Graph& g, CudaSchedule* cs, bool descriptive) {
  std::unordered_map<int, const std::string*> op_of;
  for (const auto& n : g.nodes) op_of[n.id] = &n.op;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    Kernel& kernel = s.kernels[k];
    const CudaKernelSchedule* ks = cs && k < cs->kernels.size() ? &cs->kernels[k] : nullptr;
    if (!descriptive) {
      kernel.name = short_kernel_name(static_cast<int>(k));
    } else {
      std::set<int> origins;  // node ids: graph order
      for (const auto& st : kernel.stages)
        for (const auto& item : st.items)
          for (int o : p.computed[item.computed].origins) origins.insert(o);
      std::vector<std::string> ops;
      for (int o : origins)
        if (auto it = op_of.find(o); it != op_of.end()) ops.push_back(*it->second);
      kernel.name = descriptive_kernel_name(kernel_kind(kernel, ks), ops, static_cast<int>(k));
    }
    if (cs && k < cs->kernels.size()) cs->kernels[k].info.name = kernel.name;
  }
}

}  // namespace ember
