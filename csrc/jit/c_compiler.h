// The host C compiler, which turns generated CPU kernels into shared objects.
//
// identity() names everything that changes the machine code it produces, so a cache key
// built from (source, identity) never hands back an object made by another compiler, with
// other flags, or for another CPU: a -march=native object from an AVX-512 machine dies of
// SIGILL on one without it, which happens as soon as a cache directory is shared.
//
// The compiler runs without a shell (nothing in a path or flag is ever interpreted), with
// stdin from /dev/null so it can never wait for input, and its stdout and stderr captured
// together as the log.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ember {

// What identity() learns by running the compiler: its `--version` line, the CPU that
// -march=native selects, and the gather switch it takes (flags()). Four short compiler
// runs: 0.06-0.14 s on a loaded 2-core machine, on every process's first kernel key.
struct CompilerProbe {
  std::string version;
  std::string target;
  std::vector<std::string> tuning;
};

struct CompileResult {
  bool ok = false;
  std::string log;       // the compiler's own output, or why it could not be run
  double seconds = 0.0;  // wall time of the whole call
  int failed_unit = -1;  // compile_shared_object(units): the unit the compiler rejected
};

// The cores this process may run on (its affinity mask), at least 1.
int available_cores();

class CCompiler {
 public:
  // Picks $EMBER_CC if set (a single executable, no arguments), else cc, else gcc, and
  // resolves it to an absolute path through $PATH. A compiler that cannot be found is not
  // an error here: compile_shared_object() reports it.
  CCompiler();

  const std::string& path() const { return path_; }

  // -O2 -march=native [gathers on] -fPIC -shared -fno-math-errno -fno-trapping-math -fwrapv
  // -fno-thread-jumps -fopenmp -std=c11. No -ffast-math: NaN and signed-zero semantics
  // must match PyTorch's. Whether the compiler takes a switch for vector gathers is
  // probed once (the first call runs it).
  std::vector<std::string> flags() const;
  // Placed after the source file, as the linker wants libraries: -lm.
  std::vector<std::string> extra_link_flags() const;

  // Compiler path (and what it resolves to), its `--version` first line, the flags, and the
  // CPU that -march=native selects. Computed once, on first use, by running the compiler;
  // safe to call from several threads.
  const std::string& identity() const;

  // What the probe's answers depend on, known without running anything: the compiler's
  // path and what it resolves to, each file's device, inode, size and mtime; this CPU
  // (/proc/cpuinfo's vendor, family, model, name and feature flags); the probe's own
  // switches. Equal fingerprints give equal probes, so a caller may keep a probe under
  // it (the kernel cache does: runtime/compiler_memo.h) and hand it back with seed().
  std::string fingerprint() const;
  // Runs the compiler for identity()'s parts (nothing memoized).
  CompilerProbe probe() const;
  // Takes `p` as the probe's answers, so that identity() and flags() run nothing. No
  // effect once they have been computed (they never change within a process).
  void seed(const CompilerProbe& p) const;
  // Whether the probe's answers are known (run or seeded), or not needed (no compiler).
  bool probed() const;
  // The answers identity() uses (probing first if needed).
  CompilerProbe probe_answers() const;

  // Writes source to out_path + ".c", compiles it to out_path and removes the .c file
  // unless keep_source. ok=false with the reason in log when the compiler fails or cannot
  // be run. Safe to call from several threads with different out_paths.
  CompileResult compile_shared_object(const std::string& source, const std::string& out_path,
                                      bool keep_source = false) const;
  // The same for a source in several translation units (each complete, with its own
  // includes; their external symbols distinct): one unit as above; several are compiled to
  // object files side by side, one compiler process each, and linked into out_path. The
  // units' files are removed; ok=false names the unit that failed.
  CompileResult compile_shared_object(const std::vector<std::string>& units, const std::string& out_path) const;

 private:
  struct IdentityMemo;

  std::string path_;
  std::string not_found_;  // why no compiler was found; empty when path_ is usable
  std::shared_ptr<IdentityMemo> identity_;  // shared, so copies memoize once
};

}  // namespace ember
