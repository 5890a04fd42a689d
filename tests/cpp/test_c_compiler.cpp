#include "check.h"
#include "jit/c_compiler.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"
#include "runtime/shared_library.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using ember::CCompiler;
using ember::CompileResult;
using ember::SharedLibrary;

namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/ember_cc_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::string cmd = "rm -rf '" + path + "'";
    int status = std::system(cmd.c_str());
    (void)status;  // best effort: a leftover directory in /tmp is harmless
  }
};

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

using AnswerFn = int (*)(void);

}  // namespace

TEST(c_compiler_compiles_and_loads) {
  ScratchDir scratch;
  CCompiler cc;
  CHECK(!cc.path().empty());
  CHECK_EQ(cc.path()[0], '/');
  std::string so = scratch.path + "/answer.so";
  CompileResult r = cc.compile_shared_object("int answer(void) { return 42; }\n", so);
  CHECK(r.ok);
  if (!r.ok) std::cerr << r.log;
  CHECK(r.seconds > 0);
  CHECK(exists(so));
  CHECK(!exists(so + ".c"));

  std::string error;
  std::unique_ptr<SharedLibrary> lib = SharedLibrary::open(so, &error);
  CHECK(lib != nullptr);
  CHECK_EQ(error, "");
  if (!lib) return;
  auto answer = reinterpret_cast<AnswerFn>(lib->symbol("answer"));
  CHECK(answer != nullptr);
  if (answer) CHECK_EQ(answer(), 42);
  CHECK(lib->symbol("no_such_symbol") == nullptr);
}

TEST(c_compiler_links_libm_and_keeps_source) {
  ScratchDir scratch;
  CCompiler cc;
  std::string so = scratch.path + "/root.so";
  CompileResult r = cc.compile_shared_object(
      "#include <math.h>\ndouble root(double x) { return sqrt(x) + erf(x) * 0; }\n", so, /*keep_source=*/true);
  CHECK(r.ok);
  CHECK(exists(so + ".c"));
  std::string error;
  auto lib = SharedLibrary::open(so, &error);
  CHECK(lib != nullptr);
  if (!lib) return;
  auto root = reinterpret_cast<double (*)(double)>(lib->symbol("root"));
  CHECK(root != nullptr);
  if (root) CHECK_EQ(root(16.0), 4.0);
}

TEST(c_compiler_syntax_error) {
  ScratchDir scratch;
  CCompiler cc;
  CompileResult r = cc.compile_shared_object("int broken(void) { return 1 +; }\n", scratch.path + "/broken.so");
  CHECK(!r.ok);
  CHECK(r.log.find("error") != std::string::npos);
  CHECK(!exists(scratch.path + "/broken.so.c"));
}

TEST(c_compiler_missing_compiler) {
  const char* saved = std::getenv("EMBER_CC");
  std::string saved_value = saved ? saved : "";
  ::setenv("EMBER_CC", "/nonexistent/bin/cc", 1);
  CCompiler cc;
  if (saved) {
    ::setenv("EMBER_CC", saved_value.c_str(), 1);
  } else {
    ::unsetenv("EMBER_CC");
  }
  CHECK_EQ(cc.path(), "/nonexistent/bin/cc");
  ScratchDir scratch;
  CompileResult r = cc.compile_shared_object("int f(void) { return 0; }\n", scratch.path + "/f.so");
  CHECK(!r.ok);
  CHECK(r.log.find("not found") != std::string::npos);
  CHECK(cc.identity().find("version: not found") != std::string::npos);
}

TEST(c_compiler_identity) {
  CCompiler cc;
  const std::string& id = cc.identity();
  CHECK(id.find("compiler: " + cc.path()) != std::string::npos);
  CHECK(id.find("-march=native") != std::string::npos);
  CHECK(id.find("-lm") != std::string::npos);
  CHECK(id.find("target: ") != std::string::npos);
  CHECK(id.find("target: unknown") == std::string::npos);
  CHECK(&cc.identity() == &id);  // memoized

  // Concurrent first calls agree, and copies share the memo.
  CCompiler fresh;
  CCompiler copy = fresh;
  std::vector<std::string> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { seen[t] = (t % 2 ? copy : fresh).identity(); });
  for (auto& th : threads) th.join();
  for (const auto& s : seen) CHECK_EQ(s, id);
}

TEST(c_compiler_concurrent_compiles) {
  ScratchDir scratch;
  CCompiler cc;
  std::vector<int> results(4, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string so = scratch.path + "/k" + std::to_string(t) + ".so";
      std::string src = "int value(void) { return " + std::to_string(100 + t) + "; }\n";
      if (!cc.compile_shared_object(src, so).ok) return;
      auto lib = SharedLibrary::open(so, nullptr);
      if (!lib) return;
      if (auto fn = reinterpret_cast<AnswerFn>(lib->symbol("value"))) results[t] = fn();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK_EQ(results[t], 100 + t);
}

// Several translation units, compiled side by side and linked into one library: a weak
// global defined in every unit (as the prelude's exp bounds are) links once.
TEST(c_compiler_compiles_units_side_by_side) {
  ScratchDir scratch;
  CCompiler cc;
  const std::string prelude = "__attribute__((weak)) int base = 40;\n";
  std::vector<std::string> units = {prelude + "int first(void) { return base + 1; }\n",
                                    prelude + "int second(void) { return base + 2; }\n",
                                    prelude + "int third(void) { return base + 3; }\n"};
  std::string so = scratch.path + "/units.so";
  CompileResult r = cc.compile_shared_object(units, so);
  CHECK(r.ok);
  if (!r.ok) std::cerr << r.log;
  CHECK_EQ(r.failed_unit, -1);
  for (int i = 0; i < 3; ++i) {
    CHECK(!exists(so + "." + std::to_string(i) + ".c"));
    CHECK(!exists(so + "." + std::to_string(i) + ".o"));
  }
  auto lib = SharedLibrary::open(so, nullptr);
  CHECK(lib != nullptr);
  if (!lib) return;
  const char* names[] = {"first", "second", "third"};
  for (int i = 0; i < 3; ++i) {
    auto fn = reinterpret_cast<AnswerFn>(lib->symbol(names[i]));
    CHECK(fn != nullptr);
    if (fn) CHECK_EQ(fn(), 41 + i);
  }
}

TEST(c_compiler_names_the_unit_that_fails) {
  ScratchDir scratch;
  CCompiler cc;
  std::string so = scratch.path + "/bad.so";
  CompileResult r = cc.compile_shared_object(
      std::vector<std::string>{"int good(void) { return 1; }\n", "int bad(void) { return 1 +; }\n"}, so);
  CHECK(!r.ok);
  CHECK_EQ(r.failed_unit, 1);
  CHECK(r.log.find("translation unit 1 of 2") != std::string::npos);
  CHECK(r.log.find("error") != std::string::npos);
  CHECK(!exists(so));
  CHECK(!exists(so + ".0.o"));
  CHECK(!exists(so + ".1.c"));

  // Two units defining the same strong symbol compile, and fail to link.
  r = cc.compile_shared_object(std::vector<std::string>{"int twice(void) { return 1; }\n",
                                                        "int twice(void) { return 2; }\n"}, so);
  CHECK(!r.ok);
  CHECK_EQ(r.failed_unit, -1);
  CHECK(r.log.find("linking") != std::string::npos);
  CHECK(ember::available_cores() >= 1);
}

TEST(shared_library_open_failure) {
  std::string error;
  CHECK(SharedLibrary::open("/nonexistent/lib.so", &error) == nullptr);
  CHECK(!error.empty());
  CHECK(SharedLibrary::open("/nonexistent/lib.so", nullptr) == nullptr);

  // A file without a slash is the file in the working directory, never a system library.
  error.clear();
  CHECK(SharedLibrary::open("libm.so.6", &error) == nullptr);
  CHECK(!error.empty());
}

// The intended pipeline: compile into the cache's tmp/, install, look up, load.
TEST(c_compiler_with_disk_cache) {
  ScratchDir scratch;
  ember::DiskCache cache(scratch.path + "/cache");
  CCompiler cc;
  std::string source = "int answer(void) { return 42; }\n";
  std::string key = ember::sha256_hex(cc.identity() + source);
  CHECK(!cache.lookup(key, "so").has_value());

  std::string out = cache.temp_path("so");
  CHECK(cc.compile_shared_object(source, out).ok);
  std::optional<std::string> installed = cache.install(key, "so", out);
  CHECK(installed.has_value());
  std::optional<std::string> found = cache.lookup(key, "so");
  CHECK(found.has_value());
  if (!found) return;
  auto lib = SharedLibrary::open(*found, nullptr);
  CHECK(lib != nullptr);
  if (!lib) return;
  auto answer = reinterpret_cast<AnswerFn>(lib->symbol("answer"));
  CHECK(answer && answer() == 42);
}
