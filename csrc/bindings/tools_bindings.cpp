// What `ember doctor` and `ember cache` ask the core: the C compiler it would use (and
// whether it works), and the disk cache's own view of a directory (its safety checks,
// entry count and size, and clearing its entries).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "jit/c_compiler.h"
#include "runtime/disk_cache.h"
#include "runtime/shared_library.h"

namespace nb = nanobind;

namespace {

nb::dict cache_dict(const ember::DiskCache& cache) {
  nb::dict d;
  d["dir"] = cache.dir();
  d["usable"] = cache.usable();
  d["reason"] = cache.reason();
  d["problem"] = cache.problem();
  d["fix"] = cache.fix();
  d["entries"] = cache.entry_count();
  d["bytes"] = cache.size_bytes();
  return d;
}

// Compiles and loads a one-function library with the JIT's own flags, in a private
// temporary directory, and calls the function.
nb::dict check_c_compiler() {
  ember::CCompiler cc;
  nb::dict d;
  d["path"] = cc.path();
  d["flags"] = nb::cast(cc.flags());
  d["identity"] = cc.identity();
  char tmpl[] = "/tmp/ember-doctor-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (!dir) {
    d["ok"] = false;
    d["log"] = "cannot create a temporary directory";
    return d;
  }
  std::string out = std::string(dir) + "/check.so";
  const std::string source =
      "#include <math.h>\n"
      "double ember_doctor_check(double x) {\n"
      "  double s = 0;\n"
      "  #pragma omp simd reduction(+:s)\n"
      "  for (int i = 0; i < 64; ++i) s += exp(x * i);\n"
      "  return s;\n"
      "}\n";
  ember::CompileResult r;
  {
    nb::gil_scoped_release release;
    r = cc.compile_shared_object(source, out, false);
  }
  d["seconds"] = r.seconds;
  d["log"] = r.log;
  bool ok = r.ok;
  if (ok) {
    std::string err;
    auto lib = ember::SharedLibrary::open(out, &err);
    auto fn = lib ? reinterpret_cast<double (*)(double)>(lib->symbol("ember_doctor_check")) : nullptr;
    if (!fn) {
      ok = false;
      d["log"] = "compiled, but loading failed: " + err;
    } else if (fn(0.0) != 64.0) {
      ok = false;
      d["log"] = "compiled and loaded, but computed a wrong value";
    }
  }
  d["ok"] = ok;
  ::unlink(out.c_str());
  ::rmdir(dir);
  return d;
}

}  // namespace

void define_tools(nb::module_& m) {
  m.def("check_c_compiler", &check_c_compiler,
        "Compile, load and call a tiny kernel with the JIT's compiler and flags; a dict with "
        "path, flags, identity, ok, log, seconds.");
  m.def(
      "disk_cache_info", [](const std::string& dir) { return cache_dict(ember::DiskCache(dir)); }, nb::arg("dir"),
      "The disk cache at dir as the core sees it (creates dir if missing): dir, usable, reason, problem, fix, "
      "entries, bytes.");
  m.def(
      "disk_cache_clear",
      [](const std::string& dir) {
        ember::DiskCache cache(dir);
        nb::dict before = cache_dict(cache);
        cache.clear();
        return before;
      },
      nb::arg("dir"),
      "Remove ember's entries (and orphaned artifacts) from a usable cache; other files stay. Returns what was "
      "there before.");
}
