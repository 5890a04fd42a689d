#include "codegen/c/units.h"

#include <algorithm>

namespace ember {

namespace {

size_t kernel_bytes(const GeneratedCode& code) {
  return code.kernel_begin.empty() ? 0 : code.source.size() - code.kernel_begin.front();
}

}  // namespace

int unit_count(const GeneratedCode& code, int cores) {
  const size_t bytes = kernel_bytes(code);
  const int by_size = static_cast<int>((bytes + kMinUnitBytes - 1) / kMinUnitBytes);
  const int limit = std::min({std::max(cores, 1), kMaxUnits, static_cast<int>(code.kernel_begin.size())});
  return std::max(1, std::min(by_size, limit));
}

std::vector<std::string> split_units(const GeneratedCode& code, int count) {
  const size_t n = code.kernel_begin.size();
  if (count <= 1 || n <= 1) return {code.source};
  count = std::min(count, static_cast<int>(n));
  const std::string prelude = code.source.substr(0, code.kernel_begin.front());
  auto end_of = [&](size_t k) { return k + 1 < n ? code.kernel_begin[k + 1] : code.source.size(); };

  std::vector<std::string> units;
  size_t k = 0;
  for (int u = 0; u < count; ++u) {
    const size_t to_come = static_cast<size_t>(count - u - 1);
    const size_t begin = code.kernel_begin[k];
    const size_t share = (code.source.size() - begin) / (to_come + 1);
    // A unit takes kernels while their middle falls within its share of what is left,
    // leaving at least one for each unit to come; the last one takes the rest.
    size_t end = end_of(k++);
    while (k < n - to_come && (to_come == 0 || (code.kernel_begin[k] + end_of(k)) / 2 - begin <= share)) {
      end = end_of(k++);
    }
    units.push_back(prelude + code.source.substr(begin, end - begin));
  }
  return units;
}

}  // namespace ember
