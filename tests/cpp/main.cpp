#include "check.h"

#include <cstring>

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  int passed = 0, failed = 0;
  for (auto& c : ember_test::registry()) {
    if (filter && !std::strstr(c.name.c_str(), filter)) continue;
    ember_test::failures_in_case() = 0;
    try {
      c.fn();
    } catch (const std::exception& e) {
      ember_test::fail(c.name.c_str(), 0, std::string("unexpected exception: ") + e.what());
    }
    if (ember_test::failures_in_case() == 0) {
      ++passed;
    } else {
      ++failed;
      std::cerr << "FAILED " << c.name << "\n";
    }
  }
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
