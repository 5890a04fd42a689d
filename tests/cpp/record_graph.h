// With $EMBER_RECORD_GRAPHS set to a directory, every graph text a test helper compiles
// is written there (<hash>.graph), so that tests/tools/dump_generated.py can check the
// generated code of the C++ tests' graphs too.
#pragma once
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

namespace ember_test {

inline const std::string& recorded(const std::string& text) {
  if (const char* dir = std::getenv("EMBER_RECORD_GRAPHS"); dir && *dir)
    std::ofstream(std::string(dir) + "/cpp_" + std::to_string(std::hash<std::string>()(text)) + ".graph") << text;
  return text;
}

}  // namespace ember_test
