#include "jit/c_compiler.h"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

extern char** environ;

namespace ember {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Like the shell's lookup: a name with a slash is a path, anything else is searched in
// $PATH. Returns "" if nothing executable is found.
std::string resolve_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    std::string path = name;
    char cwd[PATH_MAX];
    if (name[0] != '/' && ::getcwd(cwd, sizeof cwd)) path = std::string(cwd) + "/" + name;
    return is_executable_file(path) ? path : "";
  }
  const char* env_path = std::getenv("PATH");
  std::string search = env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream dirs(search);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty() || dir[0] != '/') continue;  // relative entries would make the path cwd-dependent
    std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

struct ProcessResult {
  bool started = false;
  int exit_status = -1;  // -1 when killed by a signal
  std::string output;    // stdout and stderr, interleaved; or why it did not start
};

// Runs argv[0] (an absolute path) with no shell, stdin from /dev/null, and collects
// stdout+stderr through one pipe.
ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult result;
  int pipe_fds[2];
  // O_CLOEXEC: a child spawned concurrently by another thread must not inherit our write
  // end, or our read would not see end-of-file until that child exits.
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int err = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (err != 0) {
    ::close(pipe_fds[0]);
    result.output = "cannot run " + argv[0] + ": " + std::strerror(err);
    return result;
  }

  char buf[4096];
  for (;;) {
    ssize_t got = ::read(pipe_fds[0], buf, sizeof buf);
    if (got > 0) {
      result.output.append(buf, size_t(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      result.output += "\nwaitpid: " + std::string(std::strerror(errno));
      return result;
    }
  }
  result.started = true;
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// O_NOFOLLOW: a symlink planted at the path cannot redirect the write to another file.
bool write_file(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t put = ::write(fd, data.data() + done, data.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      return false;
    }
    done += size_t(put);
  }
  return ::close(fd) == 0;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

// What -march=native means on this machine, from `<cc> -march=native -Q --help=target`
// (GCC): the chosen -march/-mtune and every enabled -m option. "" if the compiler does not
// answer in that form (clang, say).
std::string native_target_from_compiler(const std::string& cc) {
  ProcessResult r = run_process({cc, "-march=native", "-Q", "--help=target"});
  if (!r.started || r.exit_status != 0) return "";
  std::string march, mtune;
  std::vector<std::string> enabled;
  std::stringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream words(line);
    std::string option, value;
    words >> option >> value;
    if (option == "-march=") march = value;
    if (option == "-mtune=") mtune = value;
    if (option.rfind("-m", 0) == 0 && value == "[enabled]") enabled.push_back(option);
  }
  if (march.empty()) return "";
  return "-march=" + march + " -mtune=" + mtune + " " + join(enabled);
}

// The CPU feature list the kernel reports: "flags" on x86, "Features" on ARM.
std::string native_target_from_cpuinfo() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return "cpu flags:" + line.substr(colon + 1);
    }
  }
  return "unknown";
}

}  // namespace

// A mutex, not std::call_once: call_once keeps its callable in libstdc++ TLS
// globals, which break when the host process carries another copy of libstdc++
// (ember crashed on first compile that way under one torch build).
struct CCompiler::IdentityMemo {
  std::mutex mu;
  bool probed = false;
  CompilerProbe probe;
  bool done = false;
  std::string text;
};

namespace {

// Vector gathers, where the compiler accepts a switch for them. GCC's generic tuning
// turns gathers off (slow on some AMD and microcode-mitigated Intel parts), and without
// them a simd loop that reads `a[i / 2]` or a data-dependent index (max-pool's backward,
// embedding, any gather-form lowering) stays scalar: max-pool's backward ran 3-4x faster
// with them on this project's Xeon. GCC 12 spells the switch use_gather; 13 and later
// split it by vector size. A flag is kept only if the compiler takes it silently.
#if defined(__x86_64__)
const char* const kGatherSwitches[] = {"-mtune-ctrl=use_gather_2parts,use_gather_4parts,use_gather_8parts",
                                       "-mtune-ctrl=use_gather"};
#endif

// 512-bit vectors where the CPU has AVX-512. GCC's tuning for the AVX-512 Xeons it knows
// by name (-march=native on Skylake-X through Sapphire Rapids, GCC 13 and later for the
// latter) prefers 256-bit vectors, while its generic tuning (what GCC 12 falls back to on
// a CPU it does not know) uses 512: the same kernels then ran at two vector widths on two
// hosts of one CPU model, and Inductor's C++ kernels, which use 512-bit vectors on any
// AVX-512 CPU, were ~1.3x faster than ember's on transcendental and reduction kernels
// (gelu, silu, softmax) where the tuning chose 256.
#if defined(__x86_64__)
const char* const kWideVectors = "-mprefer-vector-width=512";
#endif

bool cpu_has_flag(const std::string& flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) return (line + " ").find(" " + flag + " ") != std::string::npos;
  }
  return false;
}

bool accepted_silently(const std::string& cc, const char* flag) {
  ProcessResult r = run_process({cc, "-march=native", flag, "-x", "c", "-c", "-o", "/dev/null", "/dev/null"});
  return r.started && r.exit_status == 0 && r.output.empty();
}

std::vector<std::string> probe_tuning(const std::string& cc) {
  std::vector<std::string> tuning;
#if defined(__x86_64__)
  for (const char* flag : kGatherSwitches) {
    if (accepted_silently(cc, flag)) {
      tuning.push_back(flag);
      break;
    }
  }
  if (cpu_has_flag("avx512f") && accepted_silently(cc, kWideVectors)) tuning.push_back(kWideVectors);
#else
  (void)cc;
#endif
  return tuning;
}

// A file as the fingerprint sees it: a new build or a reinstall changes one of these.
std::string file_stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return path + ": cannot stat\n";
  return path + ": dev " + std::to_string(st.st_dev) + " ino " + std::to_string(st.st_ino) + " size " +
         std::to_string(st.st_size) + " mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + "\n";
}

// The lines of /proc/cpuinfo's first processor that -march=native reads (x86: vendor,
// family, model, stepping, feature flags; ARM: implementer, part, features). "" when the
// file says none of them: then nothing identifies the CPU without asking the compiler.
std::string cpu_description() {
  static const char* const keys[] = {"vendor_id", "cpu family", "model", "model name", "stepping", "flags",
                                     "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "Features"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(cpuinfo, line)) {
    if (line.empty()) {
      if (!out.empty()) break;  // the first processor's block is enough
      continue;
    }
    std::string key = line.substr(0, line.find(':'));
    key.erase(key.find_last_not_of(" \t") + 1);
    for (const char* k : keys) {
      if (key == k) out += line + "\n";
    }
  }
  return out;
}

// The compiler's output, and how it ended when it failed.
std::string outcome_log(const ProcessResult& r, const std::string& compiler) {
  std::string log = r.output;
  if (r.started && r.exit_status != 0) {
    log += r.exit_status < 0 ? compiler + " was killed by a signal\n"
                             : compiler + " exited with status " + std::to_string(r.exit_status) + "\n";
  }
  return log;
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

CCompiler::CCompiler() : identity_(std::make_shared<IdentityMemo>()) {
  const char* env_cc = std::getenv("EMBER_CC");
  std::vector<std::string> candidates;
  if (env_cc && *env_cc) {
    candidates = {env_cc};  // an explicit choice is not silently replaced by another compiler
  } else {
    candidates = {"cc", "gcc"};
  }
  for (const std::string& name : candidates) {
    path_ = resolve_executable(name);
    if (!path_.empty()) return;
  }
  path_ = candidates[0];
  not_found_ = "C compiler '" + candidates[0] + "' not found" +
               (env_cc && *env_cc ? std::string(" (from EMBER_CC)") : std::string(" on PATH (nor gcc)"));
}

std::vector<std::string> CCompiler::flags() const {
  // -fwrapv: integer overflow wraps, as in ATen (two's complement), instead of being undefined.
  // -fno-thread-jumps: GCC's jump threading duplicates the blocks of a chain of selects
  // that share a condition (max-pool's running argmax) into a shape if-conversion gives
  // up on, and the loop stays scalar.
  std::vector<std::string> f = {"-O2", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math",
                                "-fwrapv", "-fno-thread-jumps", "-fopenmp", "-std=c11"};
  if (not_found_.empty()) {
    std::lock_guard<std::mutex> lock(identity_->mu);
    if (!identity_->probed) {
      identity_->probe = probe();
      identity_->probed = true;
    }
    f.insert(f.begin() + 2, identity_->probe.tuning.begin(), identity_->probe.tuning.end());
  }
  return f;
}

std::vector<std::string> CCompiler::extra_link_flags() const { return {"-lm"}; }

CompilerProbe CCompiler::probe() const {
  CompilerProbe p;
  if (!not_found_.empty()) return p;
  ProcessResult r = run_process({path_, "--version"});
  p.version = r.started ? first_line(r.output) : "cannot run";
  p.target = native_target_from_compiler(path_);
  p.tuning = probe_tuning(path_);
  return p;
}

std::string CCompiler::fingerprint() const {
  if (!not_found_.empty()) return "";
  std::string cpu = cpu_description();
  if (cpu.empty()) return "";
  std::string fp = "ember compiler probe 2\n" + file_stamp(path_);
  char buf[PATH_MAX];
  if (::realpath(path_.c_str(), buf)) fp += file_stamp(buf);
#if defined(__x86_64__)
  for (const char* flag : kGatherSwitches) fp += std::string("probe: ") + flag + "\n";
  fp += std::string("probe: ") + kWideVectors + " where avx512f\n";
#endif
  return fp + cpu;
}

void CCompiler::seed(const CompilerProbe& p) const {
  std::lock_guard<std::mutex> lock(identity_->mu);
  if (identity_->probed || !not_found_.empty()) return;
  identity_->probe = p;
  identity_->probed = true;
}

bool CCompiler::probed() const {
  std::lock_guard<std::mutex> lock(identity_->mu);
  return identity_->probed || !not_found_.empty();
}

CompilerProbe CCompiler::probe_answers() const {
  flags();  // probes once
  std::lock_guard<std::mutex> lock(identity_->mu);
  return identity_->probe;
}

const std::string& CCompiler::identity() const {
  const std::vector<std::string> all_flags = flags();  // takes the lock itself, and probes
  std::lock_guard<std::mutex> lock(identity_->mu);
  if (!identity_->done) {
    std::string resolved = path_;
    char buf[PATH_MAX];
    if (not_found_.empty() && ::realpath(path_.c_str(), buf)) resolved = buf;
    const CompilerProbe& p = identity_->probe;
    std::string version = not_found_.empty() ? p.version : "not found";
    std::string target = p.target.empty() ? native_target_from_cpuinfo() : p.target;
    identity_->text = "compiler: " + path_ + " -> " + resolved + "\n" + "version: " + version + "\n" +
                      "flags: " + join(all_flags) + " " + join(extra_link_flags()) + "\n" + "target: " + target +
                      "\n";
    identity_->done = true;
  }
  return identity_->text;
}

CompileResult CCompiler::compile_shared_object(const std::string& source, const std::string& out_path,
                                               bool keep_source) const {
  auto start = std::chrono::steady_clock::now();
  CompileResult result;
  auto finish = [&]() {
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  };
  if (!not_found_.empty()) {
    result.log = not_found_;
    return finish();
  }

  std::string source_path = out_path + ".c";
  if (!write_file(source_path, source)) {
    result.log = "cannot write " + source_path + ": " + std::strerror(errno);
    ::unlink(source_path.c_str());
    return finish();
  }

  std::vector<std::string> argv = {path_};
  for (const std::string& f : flags()) argv.push_back(f);
  argv.insert(argv.end(), {"-o", out_path, source_path});
  for (const std::string& f : extra_link_flags()) argv.push_back(f);

  ProcessResult r = run_process(argv);
  result.ok = r.started && r.exit_status == 0;
  result.log = outcome_log(r, path_);
  if (!keep_source) ::unlink(source_path.c_str());
  return finish();
}

CompileResult CCompiler::compile_shared_object(const std::vector<std::string>& units,
                                               const std::string& out_path) const {
  if (units.size() == 1) return compile_shared_object(units[0], out_path, false);
  auto start = std::chrono::steady_clock::now();
  CompileResult result;
  auto finish = [&]() {
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  };
  if (!not_found_.empty() || units.empty()) {
    result.log = units.empty() ? "no translation units" : not_found_;
    return finish();
  }

  const size_t n = units.size();
  std::vector<std::string> sources(n), objects(n);
  auto remove_files = [&] {
    for (size_t i = 0; i < n; ++i) {
      ::unlink(sources[i].c_str());
      ::unlink(objects[i].c_str());
    }
  };
  for (size_t i = 0; i < n; ++i) {
    sources[i] = out_path + "." + std::to_string(i) + ".c";
    objects[i] = out_path + "." + std::to_string(i) + ".o";
    if (!write_file(sources[i], units[i])) {
      result.log = "cannot write " + sources[i] + ": " + std::strerror(errno);
      remove_files();
      return finish();
    }
  }

  // -c in place of -shared: each unit to an object file, each on a thread of its own (the
  // compilers run side by side; the threads only wait for them).
  std::vector<std::string> compile_flags;
  for (const std::string& f : flags()) compile_flags.push_back(f == "-shared" ? "-c" : f);
  std::vector<ProcessResult> runs(n);
  auto compile_unit = [&](size_t i) {
    std::vector<std::string> argv = {path_};
    argv.insert(argv.end(), compile_flags.begin(), compile_flags.end());
    argv.insert(argv.end(), {"-o", objects[i], sources[i]});
    runs[i] = run_process(argv);
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back(compile_unit, i);
  compile_unit(0);
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].started && runs[i].exit_status == 0) continue;
    result.failed_unit = static_cast<int>(i);
    result.log = "translation unit " + std::to_string(i) + " of " + std::to_string(n) + ":\n" +
                 outcome_log(runs[i], path_);
    remove_files();
    return finish();
  }

  std::vector<std::string> argv = {path_};
  for (const std::string& f : flags()) argv.push_back(f);
  argv.insert(argv.end(), {"-o", out_path});
  argv.insert(argv.end(), objects.begin(), objects.end());
  for (const std::string& f : extra_link_flags()) argv.push_back(f);
  ProcessResult link = run_process(argv);
  result.ok = link.started && link.exit_status == 0;
  for (const ProcessResult& r : runs) result.log += r.output;  // warnings, if any
  if (!result.ok) result.log += "linking the translation units:\n" + outcome_log(link, path_);
  remove_files();
  return finish();
}

}  // namespace ember
