#include "runtime/compiler_memo.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "runtime/disk_cache.h"
#include "runtime/sha256.h"

namespace ember {

namespace {

constexpr const char* kFormat = "ember-compiler-probe-v1";
constexpr const char* kSuffix = "ccprobe";

bool has_newline(const std::string& s) { return s.find('\n') != std::string::npos; }

}  // namespace

std::string probe_text(const CompilerProbe& p) {
  std::string tuning;
  for (const std::string& t : p.tuning) tuning += (tuning.empty() ? "" : " ") + t;
  return std::string(kFormat) + "\nversion: " + p.version + "\ntarget: " + p.target + "\ntuning: " + tuning + "\n";
}

bool parse_probe(const std::string& text, CompilerProbe* out) {
  std::istringstream in(text);
  std::string format, version, target, tuning, extra;
  if (!std::getline(in, format) || format != kFormat) return false;
  if (!std::getline(in, version) || version.rfind("version: ", 0) != 0) return false;
  if (!std::getline(in, target) || target.rfind("target: ", 0) != 0) return false;
  if (!std::getline(in, tuning) || tuning.rfind("tuning: ", 0) != 0) return false;
  if (std::getline(in, extra)) return false;
  CompilerProbe p;
  p.version = version.substr(9);
  p.target = target.substr(8);
  std::istringstream words(tuning.substr(8));
  for (std::string w; words >> w;) p.tuning.push_back(w);
  *out = std::move(p);
  return true;
}

const std::string& compiler_identity(const CCompiler& cc, DiskCache* disk) {
  if (!disk || cc.probed()) return cc.identity();
  const std::string fingerprint = cc.fingerprint();
  if (fingerprint.empty()) return cc.identity();
  const std::string key = sha256_hex(fingerprint);
  if (auto path = disk->lookup(key, kSuffix)) {
    std::ifstream f(*path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CompilerProbe p;
    if (parse_probe(text, &p)) {
      cc.seed(p);
      return cc.identity();
    }
  }
  CompilerProbe p = cc.probe();
  cc.seed(p);
  if (!has_newline(p.version) && !has_newline(p.target)) {
    try {
      const std::string tmp = disk->temp_path(kSuffix);
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << probe_text(p);
      f.close();
      if (!f || !disk->install(key, kSuffix, tmp)) std::remove(tmp.c_str());
    } catch (const std::exception&) {
      // Not kept: the next process probes again.
    }
  }
  return cc.identity();
}

}  // namespace ember
