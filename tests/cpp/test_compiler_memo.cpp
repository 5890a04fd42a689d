// The compiler's probe kept in the kernel cache (runtime/compiler_memo.h).
#include "check.h"
#include "jit/c_compiler.h"
#include "runtime/compiler_memo.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

using ember::CCompiler;
using ember::CompilerProbe;
using ember::DiskCache;

namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/ember_memo_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::string cmd = "rm -rf '" + path + "'";
    int status = std::system(cmd.c_str());
    (void)status;
  }
};

// Stores text as the probe entry a compiler with cc's fingerprint would find.
void plant(DiskCache& disk, const CCompiler& cc, const std::string& text) {
  std::string tmp = disk.temp_path("ccprobe");
  std::ofstream(tmp, std::ios::binary) << text;
  CHECK(disk.install(ember::sha256_hex(cc.fingerprint()), "ccprobe", tmp).has_value());
}

}  // namespace

TEST(compiler_probe_text_round_trip) {
  CompilerProbe p{"cc (Debian 12.2.0) 12.2.0", "-march=x -mtune=generic -mavx2", {"-mtune-ctrl=use_gather"}};
  CompilerProbe back;
  CHECK(ember::parse_probe(ember::probe_text(p), &back));
  CHECK_EQ(back.version, p.version);
  CHECK_EQ(back.target, p.target);
  CHECK_EQ(back.tuning.size(), size_t{1});
  CHECK_EQ(back.tuning[0], p.tuning[0]);
  CompilerProbe none{"v", "", {}};
  CHECK(ember::parse_probe(ember::probe_text(none), &back));
  CHECK(back.tuning.empty());
  CHECK(back.target.empty());
  // Another format, a missing or extra line: not a probe.
  CHECK(!ember::parse_probe("ember-compiler-probe-v0\nversion: v\ntarget: t\ntuning: \n", &back));
  CHECK(!ember::parse_probe("ember-compiler-probe-v1\nversion: v\ntarget: t\n", &back));
  CHECK(!ember::parse_probe("ember-compiler-probe-v1\nversion: v\ntarget: t\ntuning: \nmore\n", &back));
  CHECK(!ember::parse_probe("", &back));
}

TEST(compiler_fingerprint_names_the_compiler_and_the_cpu) {
  CCompiler cc;
  std::string fp = cc.fingerprint();
  CHECK(!fp.empty());
  CHECK(fp.find(cc.path() + ": dev ") != std::string::npos);
  CHECK(fp.find(" mtime ") != std::string::npos);
  CHECK(fp.find("flags") != std::string::npos || fp.find("Features") != std::string::npos);
  CHECK_EQ(CCompiler().fingerprint(), fp);
}

TEST(compiler_identity_kept_in_the_disk_cache) {
  ScratchDir scratch;
  DiskCache disk(scratch.path + "/cache");
  CHECK(disk.usable());
  const std::string direct = CCompiler().identity();

  // The first process probes and keeps the probe; the identity is the one probing gives.
  CCompiler first;
  CHECK(!first.probed());
  CHECK_EQ(ember::compiler_identity(first, &disk), direct);
  CHECK(first.probed());
  CHECK_EQ(disk.entry_count(), int64_t{1});

  // The next one reads it: an entry planted under the same fingerprint is what it reports.
  CCompiler second;
  plant(disk, second, "ember-compiler-probe-v1\nversion: planted 1.0\ntarget: -march=planted\ntuning: \n");
  const std::string& seeded = ember::compiler_identity(second, &disk);
  CHECK(seeded.find("version: planted 1.0\n") != std::string::npos);
  CHECK(seeded.find("target: -march=planted\n") != std::string::npos);
  CHECK(second.probed());

  // A malformed entry is probed again and replaced.
  CCompiler third;
  plant(disk, third, "not a probe\n");
  CHECK_EQ(ember::compiler_identity(third, &disk), direct);
  CCompiler fourth;
  CHECK_EQ(ember::compiler_identity(fourth, &disk), direct);

  // No cache: the compiler runs, as before.
  CCompiler fifth;
  CHECK_EQ(ember::compiler_identity(fifth, nullptr), direct);
}

TEST(compiler_identity_of_a_missing_compiler_is_not_kept) {
  const char* saved = std::getenv("EMBER_CC");
  std::string saved_value = saved ? saved : "";
  ::setenv("EMBER_CC", "/nonexistent/bin/cc", 1);
  CCompiler cc;
  if (saved) {
    ::setenv("EMBER_CC", saved_value.c_str(), 1);
  } else {
    ::unsetenv("EMBER_CC");
  }
  ScratchDir scratch;
  DiskCache disk(scratch.path + "/cache");
  CHECK(cc.fingerprint().empty());
  CHECK(ember::compiler_identity(cc, &disk).find("version: not found") != std::string::npos);
  CHECK_EQ(disk.entry_count(), int64_t{0});
}
