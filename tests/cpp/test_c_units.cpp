#include "check.h"
#include "codegen/c/units.h"

#include <string>
#include <vector>

using ember::GeneratedCode;
using ember::kMinUnitBytes;
using ember::split_units;
using ember::unit_count;

namespace {

// A source of a prelude and kernels of the given sizes (each filled with its letter).
GeneratedCode fake_code(const std::vector<size_t>& sizes) {
  GeneratedCode code;
  code.source = "/* prelude */\n";
  for (size_t k = 0; k < sizes.size(); ++k) {
    code.kernel_begin.push_back(code.source.size());
    code.source += std::string(sizes[k], static_cast<char>('a' + k));
  }
  return code;
}

}  // namespace

TEST(c_units_count_follows_size_cores_and_kernels) {
  CHECK_EQ(unit_count(fake_code({}), 8), 1);
  CHECK_EQ(unit_count(fake_code({100}), 8), 1);
  CHECK_EQ(unit_count(fake_code({kMinUnitBytes / 2, kMinUnitBytes / 2}), 8), 1);
  CHECK_EQ(unit_count(fake_code({kMinUnitBytes, kMinUnitBytes, kMinUnitBytes}), 8), 3);
  CHECK_EQ(unit_count(fake_code({kMinUnitBytes, kMinUnitBytes, kMinUnitBytes}), 2), 2);
  CHECK_EQ(unit_count(fake_code({kMinUnitBytes, kMinUnitBytes, kMinUnitBytes}), 0), 1);
  CHECK_EQ(unit_count(fake_code({10 * kMinUnitBytes}), 8), 1);  // one kernel: one unit
  CHECK_EQ(unit_count(fake_code(std::vector<size_t>(20, kMinUnitBytes)), 64), ember::kMaxUnits);
}

TEST(c_units_keep_the_prelude_and_every_kernel_once_in_order) {
  GeneratedCode code = fake_code({500, 100, 100, 100, 100, 100, 400, 50});
  const std::string prelude = code.source.substr(0, code.kernel_begin[0]);
  CHECK_EQ(split_units(code, 1).size(), 1u);
  CHECK_EQ(split_units(code, 1)[0], code.source);
  for (int count : {2, 3, 4, 8, 20}) {
    std::vector<std::string> units = split_units(code, count);
    CHECK_EQ(units.size(), static_cast<size_t>(count < 8 ? count : 8));
    std::string kernels;
    for (const std::string& u : units) {
      CHECK_EQ(u.substr(0, prelude.size()), prelude);
      CHECK(u.size() > prelude.size());  // no unit without a kernel
      kernels += u.substr(prelude.size());
    }
    CHECK_EQ(prelude + kernels, code.source);
  }
}

TEST(c_units_are_balanced) {
  std::vector<size_t> sizes(12, 1000);
  std::vector<std::string> units = split_units(fake_code(sizes), 3);
  CHECK_EQ(units.size(), 3u);
  const size_t prelude = std::string("/* prelude */\n").size();
  for (const std::string& u : units) CHECK_EQ(u.size() - prelude, 4000u);
  // A large kernel first: it forms a unit of its own, the rest share the second.
  units = split_units(fake_code({6000, 1000, 1000, 1000, 1000, 1000, 1000}), 2);
  CHECK_EQ(units.size(), 2u);
  CHECK_EQ(units[0].size() - prelude, 6000u);
  CHECK_EQ(units[1].size() - prelude, 6000u);
}
