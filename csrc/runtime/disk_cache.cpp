#include "runtime/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/sha256.h"

namespace ember {

namespace {

constexpr const char kIndexMagic[] = "ember-cache-v1\n";
constexpr size_t kMaxIndexBytes = 256;  // magic + hash + a 20-digit size fit easily

// ---- names ---------------------------------------------------------------------------

bool is_lower_hex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_valid_key(const std::string& key) {
  return key.size() >= 16 && key.size() <= 128 && is_lower_hex(key);
}

bool is_valid_suffix(const std::string& suffix) {
  if (suffix.empty() || suffix.size() > 16) return false;
  for (char c : suffix) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!ok) return false;
  }
  return true;
}

void validate_suffix(const std::string& suffix) {
  if (!is_valid_suffix(suffix)) {
    throw std::invalid_argument("disk cache: bad suffix '" + suffix + "' (want [A-Za-z0-9_]{1,16})");
  }
}

void validate_key(const std::string& key, const std::string& suffix) {
  if (!is_valid_key(key)) {
    throw std::invalid_argument("disk cache: bad key '" + key + "' (want 16..128 lower-case hex digits)");
  }
  validate_suffix(suffix);
}

std::string shard_dir(const std::string& dir, const std::string& key) { return dir + "/" + key.substr(0, 2); }

std::string index_path(const std::string& shard, const std::string& key, const std::string& suffix) {
  return shard + "/" + key + "." + suffix + ".idx";
}

std::string artifact_path(const std::string& shard, const std::string& key, const std::string& sha,
                          const std::string& suffix) {
  return shard + "/" + key + "-" + sha + "." + suffix;
}

// Splits "name.suffix" at the last dot; false if the suffix is not one we would write.
bool split_suffix(const std::string& name, std::string* stem, std::string* suffix) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  *stem = name.substr(0, dot);
  *suffix = name.substr(dot + 1);
  return is_valid_suffix(*suffix);
}

// "<key>.<suffix>.idx"
bool is_index_name(const std::string& name) {
  const std::string ext = ".idx";
  if (name.size() <= ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return false;
  std::string key, suffix;
  return split_suffix(name.substr(0, name.size() - ext.size()), &key, &suffix) && is_valid_key(key);
}

// "<key>-<sha256>.<suffix>"
bool is_artifact_name(const std::string& name) {
  std::string stem, suffix;
  if (!split_suffix(name, &stem, &suffix)) return false;
  size_t dash = stem.find('-');
  if (dash == std::string::npos) return false;
  std::string sha = stem.substr(dash + 1);
  return is_valid_key(stem.substr(0, dash)) && sha.size() == 64 && is_lower_hex(sha);
}

// ---- ownership and permission checks -------------------------------------------------

std::string octal_mode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
  return buf;
}

// Why a directory we keep files in cannot be trusted, or "" if it can.
std::string private_dir_problem(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "is a symlink";
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != geteuid()) {
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by us (uid " + std::to_string(geteuid()) + ")";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return "is writable by group or others (mode " + octal_mode(st.st_mode) + ")";
  }
  return "";
}

// Same, looking the path up without following a final symlink.
std::string private_dir_problem(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::string("cannot be examined: ") + std::strerror(errno);
  return private_dir_problem(st);
}

// A parent of the cache directory may be shared (like /tmp) as long as nobody else can
// rename or remove what we put in it: owned by us or root, and sticky if others may write.
std::string ancestor_problem(const struct stat& st) {
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    return "is owned by uid " + std::to_string(st.st_uid) + ", neither us nor root";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    return "is writable by group or others and not sticky (mode " + octal_mode(st.st_mode) + ")";
  }
  return "";
}

// Files we hand out or trust must be regular, ours and not writable by anyone else.
bool is_private_file(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

// mkdir 0700 unless it exists, then the private-directory check. Returns "" when usable.
std::string ensure_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0) {
    ::chmod(path.c_str(), 0700);  // ours: undo a umask that removed our own bits
  } else if (errno != EEXIST) {
    return std::string("cannot be created: ") + std::strerror(errno);
  }
  return private_dir_problem(path);
}

// ---- file descriptors and contents ---------------------------------------------------

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // close(2) can report a failed write-back, so callers that wrote data check it.
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// O_NOFOLLOW: a symlink is never read through. O_NONBLOCK: a FIFO planted in place of a
// file cannot hang us (it has no effect on regular files).
int open_no_follow(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

struct Digest {
  std::string sha;
  uint64_t size = 0;
};

std::optional<Digest> hash_fd(int fd) {
  Sha256 hasher;
  Digest digest;
  char buf[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    hasher.update(buf, size_t(got));
    digest.size += uint64_t(got);
  }
  digest.sha = hasher.hex_digest();
  return digest;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t put = ::write(fd, data.data() + done, data.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += size_t(put);
  }
  return true;
}

std::string format_index(const Digest& d) {
  return std::string(kIndexMagic) + d.sha + "\n" + std::to_string(d.size) + "\n";
}

// Accepts exactly the text format_index() writes.
std::optional<Digest> parse_index(const std::string& text) {
  const size_t magic_len = sizeof(kIndexMagic) - 1;
  if (text.compare(0, magic_len, kIndexMagic) != 0) return std::nullopt;
  size_t at = magic_len;
  if (text.size() < at + 65 || text[at + 64] != '\n') return std::nullopt;
  Digest d;
  d.sha = text.substr(at, 64);
  if (!is_lower_hex(d.sha)) return std::nullopt;
  at += 65;
  size_t digits = 0;
  for (; at + digits < text.size() && text[at + digits] >= '0' && text[at + digits] <= '9'; ++digits) {
    if (digits == 19) return std::nullopt;  // beyond any real artifact; avoids overflow
    d.size = d.size * 10 + uint64_t(text[at + digits] - '0');
  }
  if (digits == 0 || at + digits + 1 != text.size() || text[at + digits] != '\n') return std::nullopt;
  return d;
}

std::optional<std::string> read_small(int fd) {
  std::string text;
  char buf[kMaxIndexBytes + 1];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) return text;
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    text.append(buf, size_t(got));
    if (text.size() > kMaxIndexBytes) return std::nullopt;
  }
}

// The commit point of an entry: the index is written to a temp file, flushed, and renamed
// into place, so readers see the old index or the whole new one.
bool commit_index(const std::string& tmp_path, const std::string& index, const Digest& digest) {
  Fd fd(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  bool ok = fd.ok() && write_all(fd.get(), format_index(digest)) && ::fsync(fd.get()) == 0;
  ok = fd.ok() && fd.close() && ok;
  if (ok && ::rename(tmp_path.c_str(), index.c_str()) == 0) return true;
  ::unlink(tmp_path.c_str());
  return false;
}

// ---- removing bad entries ------------------------------------------------------------

// Removes path only if it is still the file we examined: a concurrent install() may have
// renamed a good file into its place since, and that one must stay.
void remove_if_same(const std::string& path, const struct stat& examined) {
  struct stat now;
  if (::lstat(path.c_str(), &now) != 0) return;
  if (now.st_dev == examined.st_dev && now.st_ino == examined.st_ino && now.st_uid == geteuid()) {
    ::unlink(path.c_str());
  }
}

// Removes a file or symlink of ours that we could not even open (a symlink, say).
void remove_if_ours(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (st.st_uid == geteuid() && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) ::unlink(path.c_str());
}

enum class Verdict { good, missing, bad };

// Does path hold exactly the recorded bytes, in a file only we can change? On a bad
// verdict *examined says which file was looked at (for remove_if_same).
Verdict check_artifact(const std::string& path, const Digest& expected, struct stat* examined) {
  Fd fd(open_no_follow(path));
  if (!fd.ok()) {
    if (errno == ENOENT) return Verdict::missing;
    if (::lstat(path.c_str(), examined) != 0) return Verdict::missing;
    return Verdict::bad;
  }
  if (::fstat(fd.get(), examined) != 0) return Verdict::bad;
  if (!is_private_file(*examined) || uint64_t(examined->st_size) != expected.size) return Verdict::bad;
  std::optional<Digest> actual = hash_fd(fd.get());
  if (!actual || actual->size != expected.size || actual->sha != expected.sha) return Verdict::bad;
  return Verdict::good;
}

// Calls fn(path, name, lstat) for every file in a shard directory named like an entry.
void for_each_entry_file(const std::string& dir,
                         const std::function<void(const std::string&, const std::string&, const struct stat&)>& fn) {
  DIR* top = ::opendir(dir.c_str());
  if (!top) return;
  std::vector<std::string> shards;
  while (struct dirent* e = ::readdir(top)) {
    std::string name = e->d_name;
    if (name.size() == 2 && is_lower_hex(name) && private_dir_problem(dir + "/" + name).empty()) {
      shards.push_back(dir + "/" + name);
    }
  }
  ::closedir(top);
  for (const std::string& shard : shards) {
    DIR* d = ::opendir(shard.c_str());
    if (!d) continue;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (!is_index_name(name) && !is_artifact_name(name)) continue;
      std::string path = shard + "/" + name;
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && st.st_uid == geteuid()) fn(path, name, st);
    }
    ::closedir(d);
  }
}

// ---- temp names ----------------------------------------------------------------------

uint64_t random_u64() {
  thread_local std::mt19937_64 engine = [] {
    uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      seed ^= uint64_t(std::random_device{}()) << 32 ^ std::random_device{}();
    } catch (...) {
      // No entropy source: pid, thread and counter in the name still make it unique.
    }
    return std::mt19937_64(seed);
  }();
  return engine();
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// ---- deciding whether the cache directory can be trusted -----------------------------

std::string absolute_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + path : path;
}

// mkdir -p with mode 0700, remembering which directories are ours. Returns a problem
// ("<path> cannot be created: ...") or "".
std::string create_missing_dirs(const std::string& dir, std::vector<std::string>* created) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    struct stat st;
    if (::lstat(prefix.c_str(), &st) != 0) {
      if (::mkdir(prefix.c_str(), 0700) == 0) {
        ::chmod(prefix.c_str(), 0700);  // ours: undo a umask that removed our own bits
        created->push_back(prefix);
      } else if (errno != EEXIST) {  // EEXIST: another process was faster; checked below
        return prefix + " cannot be created: " + std::strerror(errno);
      }
    }
    if (slash == std::string::npos) return "";
  }
}

// Every directory above the (resolved) cache dir. Returns a problem or "", and the
// directory at fault in *culprit.
std::string check_ancestors(const std::string& resolved, std::string* culprit) {
  for (size_t slash = resolved.rfind('/'); slash != std::string::npos;
       slash = slash == 0 ? std::string::npos : resolved.rfind('/', slash - 1)) {
    std::string parent = slash == 0 ? "/" : resolved.substr(0, slash);
    *culprit = parent;
    struct stat st;
    if (::stat(parent.c_str(), &st) != 0) {
      return resolved + " is inside " + parent + ", which cannot be examined: " + std::strerror(errno);
    }
    std::string problem = ancestor_problem(st);
    if (!problem.empty()) return resolved + " is inside " + parent + ", which " + problem;
  }
  return "";
}

// Why a directory ember did not create would be refused, and the command that fixes it
// where one does: our own directory whose mode lets others in. Anything else (another
// owner, a symlink, a parent we do not own) is fixed by choosing another directory.
struct Problem {
  std::string what;  // follows "cache dir "; empty when the directory can be trusted
  std::string fix;   // a shell command, or empty
};

Problem dir_problem(const std::string& path) {
  Problem p{path + " " + private_dir_problem(path), ""};
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) p.fix = "chmod 700 " + path;
  return p;
}

// Returns an empty problem when the cache directory can be trusted, with its resolved
// path in *resolved_dir.
Problem trust_problem(const std::string& requested, std::string* resolved_dir) {
  if (requested.empty()) return {"'' is empty", ""};
  std::string dir = absolute_path(requested);
  if (dir[0] != '/') return {dir + " is relative and the working directory is unknown", ""};
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();

  std::vector<std::string> created;
  std::string problem = create_missing_dirs(dir, &created);
  if (!problem.empty()) return {problem, ""};

  // lstat the path as given, before anything resolves it: the cache dir itself must not be
  // a symlink. Directories we created get the same check.
  created.push_back(dir);
  for (const std::string& path : created) {
    if (!private_dir_problem(path).empty()) return dir_problem(path);
  }

  // From here on use the resolved path, so that later operations cannot be redirected
  // through a symlinked parent, and check every parent on it.
  char resolved[PATH_MAX];
  if (!::realpath(dir.c_str(), resolved)) return {dir + " cannot be resolved: " + std::strerror(errno), ""};
  std::string parent;
  problem = check_ancestors(resolved, &parent);
  if (!problem.empty()) {
    struct stat st;
    bool ours = ::stat(parent.c_str(), &st) == 0 && st.st_uid == geteuid();
    return {problem, ours ? "chmod go-w " + parent : ""};
  }
  *resolved_dir = resolved;
  return {};
}

}  // namespace

// ---- DiskCache -----------------------------------------------------------------------

DiskCache::DiskCache(std::string dir) : dir_(dir) {
  Problem problem = trust_problem(dir, &dir_);
  usable_ = problem.what.empty();
  if (!usable_) {
    problem_ = problem.what;
    fix_ = problem.fix;
    reason_ = "cache dir " + problem_ + "; refusing to load shared objects from it";
  }
}

std::optional<std::string> DiskCache::lookup(const std::string& key, const std::string& suffix) {
  validate_key(key, suffix);
  if (!usable_) return std::nullopt;
  std::string shard = shard_dir(dir_, key);
  if (!private_dir_problem(shard).empty()) return std::nullopt;

  std::string idx = index_path(shard, key, suffix);
  Fd idx_fd(open_no_follow(idx));
  if (!idx_fd.ok()) {
    if (errno != ENOENT) remove_if_ours(idx);  // a symlink or something else unreadable
    return std::nullopt;
  }
  struct stat idx_st;
  if (::fstat(idx_fd.get(), &idx_st) != 0) return std::nullopt;
  std::optional<std::string> text;
  if (is_private_file(idx_st)) text = read_small(idx_fd.get());
  std::optional<Digest> record = text ? parse_index(*text) : std::nullopt;
  if (!record) {
    remove_if_same(idx, idx_st);
    return std::nullopt;
  }

  std::string artifact = artifact_path(shard, key, record->sha, suffix);
  struct stat artifact_st;
  Verdict verdict = check_artifact(artifact, *record, &artifact_st);
  if (verdict == Verdict::good) return artifact;
  if (verdict == Verdict::bad) remove_if_same(artifact, artifact_st);
  remove_if_same(idx, idx_st);
  return std::nullopt;
}

std::string DiskCache::temp_path(const std::string& suffix) {
  validate_suffix(suffix);
  if (!usable_) throw std::runtime_error("disk cache unusable: " + reason_);
  std::string tmp = dir_ + "/tmp";
  std::string problem = ensure_private_dir(tmp);
  if (!problem.empty()) throw std::runtime_error("disk cache: " + tmp + " " + problem);

  static std::atomic<uint64_t> counter{0};
  uint64_t thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return tmp + "/ember-" + std::to_string(::getpid()) + "-" + hex64(thread).substr(8) + "-" +
         std::to_string(counter.fetch_add(1)) + "-" + hex64(random_u64()) + "." + suffix;
}

std::optional<std::string> DiskCache::install(const std::string& key, const std::string& suffix,
                                              const std::string& produced_file) {
  validate_key(key, suffix);
  if (!usable_) return std::nullopt;
  std::string tmp_prefix = dir_ + "/tmp/";
  if (produced_file.compare(0, tmp_prefix.size(), tmp_prefix) != 0 ||
      produced_file.find('/', tmp_prefix.size()) != std::string::npos ||
      produced_file.size() == tmp_prefix.size() || produced_file[tmp_prefix.size()] == '.') {
    throw std::invalid_argument("disk cache: install() takes a path from temp_path(), got " + produced_file);
  }
  std::string shard = shard_dir(dir_, key);
  if (!ensure_private_dir(shard).empty()) return std::nullopt;

  // Fix the mode first, then hash through the same descriptor: what we hash is what we name.
  Digest digest;
  {
    Fd fd(open_no_follow(produced_file));
    struct stat st;
    if (!fd.ok() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
      return std::nullopt;
    }
    if (::fchmod(fd.get(), suffix == "so" ? 0700 : 0600) != 0) return std::nullopt;
    std::optional<Digest> hashed = hash_fd(fd.get());
    if (!hashed) return std::nullopt;
    digest = *hashed;
  }

  // Content addressed: if the name exists and verifies, it already holds these bytes.
  std::string artifact = artifact_path(shard, key, digest.sha, suffix);
  struct stat existing;
  bool already_there = check_artifact(artifact, digest, &existing) == Verdict::good;
  if (!already_there && ::rename(produced_file.c_str(), artifact.c_str()) != 0) return std::nullopt;

  std::string index_tmp;
  try {
    index_tmp = temp_path("idx");
  } catch (const std::exception&) {
  }
  if (index_tmp.empty() || !commit_index(index_tmp, index_path(shard, key, suffix), digest)) {
    // Failure leaves produced_file in place, as promised: put it back if we moved it. If
    // even that fails, the caller's load fails and it recompiles.
    bool restored = already_there || ::link(artifact.c_str(), produced_file.c_str()) == 0;
    (void)restored;
    return std::nullopt;
  }
  if (already_there) ::unlink(produced_file.c_str());
  return artifact;
}

uint64_t DiskCache::size_bytes() const {
  if (!usable_) return 0;
  uint64_t total = 0;
  for_each_entry_file(dir_, [&](const std::string&, const std::string&, const struct stat& st) {
    if (S_ISREG(st.st_mode)) total += uint64_t(st.st_size);
  });
  return total;
}

int64_t DiskCache::entry_count() const {
  if (!usable_) return 0;
  int64_t count = 0;
  for_each_entry_file(dir_, [&](const std::string&, const std::string& name, const struct stat& st) {
    if (S_ISREG(st.st_mode) && is_index_name(name)) ++count;
  });
  return count;
}

void DiskCache::clear() {
  if (!usable_) return;
  // Index files first: they are the commit points, so no reader sees an entry whose
  // artifact is already gone (it would only be a miss, but a pointless one).
  for (bool indexes : {true, false}) {
    for_each_entry_file(dir_, [&](const std::string& path, const std::string& name, const struct stat& st) {
      if (is_index_name(name) == indexes && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) ::unlink(path.c_str());
    });
  }
}

}  // namespace ember
