// A minimal unit-test harness: TEST(name) registers a case, CHECK* record failures.
// The runner (main.cpp) runs every case, prints one line per failure and a closing
// "N passed, M failed" line.
#pragma once
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace ember_test {

struct Case {
  std::string name;
  std::function<void()> fn;
};

inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

inline int& failures_in_case() {
  static int n = 0;
  return n;
}

struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

inline void fail(const char* file, int line, const std::string& what) {
  ++failures_in_case();
  std::cerr << file << ":" << line << ": CHECK failed: " << what << "\n";
}

}  // namespace ember_test

#define EMBER_TEST_CAT2(a, b) a##b
#define EMBER_TEST_CAT(a, b) EMBER_TEST_CAT2(a, b)
#define TEST(name)                                                                   \
  static void name();                                                                \
  static ember_test::Register EMBER_TEST_CAT(register_, name)(#name, name);         \
  static void name()

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) ember_test::fail(__FILE__, __LINE__, #cond);                        \
  } while (0)

#define CHECK_EQ(a, b)                                                               \
  do {                                                                               \
    auto _va = (a);                                                                \
    auto _vb = (b);                                                                \
    if (!(_va == _vb)) {                                                             \
      std::ostringstream _os;                                                        \
      _os << #a << " == " << #b << "\n  left:  " << _va << "\n  right: " << _vb;    \
      ember_test::fail(__FILE__, __LINE__, _os.str());                               \
    }                                                                                \
  } while (0)

#define CHECK_THROWS(stmt)                                                           \
  do {                                                                               \
    bool _threw = false;                                                             \
    try {                                                                            \
      stmt;                                                                          \
    } catch (...) {                                                                  \
      _threw = true;                                                                 \
    }                                                                                \
    if (!_threw) ember_test::fail(__FILE__, __LINE__, "expected throw: " #stmt);    \
  } while (0)
