// The C compiler's identity with its probe kept in the kernel cache.
//
// Every CPU kernel key covers the compiler's identity (jit/c_compiler.h), whose probe runs
// the compiler four times: 0.06-0.14 s of every process's first kernel lookup on a loaded
// machine, a quarter of a precompiled artifact's load. The probe's answers depend only on
// what CCompiler::fingerprint() names (the compiler's files and this CPU), so they are kept
// as a cache entry keyed by the fingerprint's SHA-256, read back through DiskCache (owner,
// mode and digest checked on every read) instead of running the compiler. A missing, bad
// or malformed entry is probed again and rewritten; a replaced compiler or another CPU has
// another fingerprint, so it never finds this one.
#pragma once

#include <string>

#include "jit/c_compiler.h"

namespace ember {

class DiskCache;

// cc.identity(), its probe read from `disk` when kept there, else run and kept (disk may
// be null: no cache, the probe runs).
const std::string& compiler_identity(const CCompiler& cc, DiskCache* disk);

// The text a probe is kept as, and back (false: not a probe this ember wrote).
std::string probe_text(const CompilerProbe& p);
bool parse_probe(const std::string& text, CompilerProbe* out);

}  // namespace ember
