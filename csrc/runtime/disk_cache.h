// An on-disk cache of compiled artifacts (shared objects, cubins) that ember later loads and
// runs. Loading a file runs its code, so the cache must never hand out a path whose content
// someone else could have chosen.
//
// Threat model
//  * Other local users. They may have created the cache directory, or one of its parents,
//    before us (a predictable path under /tmp), or try to plant, swap or edit files in it.
//    Defence: the cache is usable only if its directory is a real directory (not a
//    symlink), owned by our euid and not writable by group or others; every directory we
//    created for it passes the same check; and every ancestor is owned by us or root and,
//    if others may write it, sticky (like /tmp), so nobody can rename our directory away
//    and put theirs in its place. A directory we did not create is never chmod-ed: we
//    refuse it and reason() says why. Inside a directory only we can write, the files we
//    verify cannot be swapped between lookup() and the caller's dlopen().
//  * Crashes, full disks and concurrent ember threads and processes. Defence: an artifact
//    is named by the SHA-256 of its content and appears by rename(2), so a name never
//    denotes a half-written file; the index file, also renamed into place, is the commit
//    point; lookup() re-hashes the artifact against the index every time. A truncated,
//    flipped, missing or foreign entry is a miss (and is removed), never a load.
//  * Not defended: processes running as our own uid (they could ptrace us anyway) or root.
//
// Layout
//   <dir>/<key[0:2]>/<key>-<sha256>.<suffix>   the artifact; its content never changes
//   <dir>/<key[0:2]>/<key>.<suffix>.idx        "ember-cache-v1\n<sha256>\n<size>\n"
//   <dir>/tmp/                                  outputs being produced, before install()
//
// Keys are lower-case hex, 16..128 characters; suffixes are [A-Za-z0-9_], 1..16 characters.
// Anything else would let a key escape the directory, so it throws std::invalid_argument.
// Reinstalling a key with different content leaves the old artifact in place (another
// process may be about to load it); clear() removes such orphans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ember {

class DiskCache {
 public:
  // Creates dir and its missing parents with mode 0700, then decides usable(). Never throws
  // for file-system problems: they make the cache unusable, with a reason().
  explicit DiskCache(std::string dir);

  bool usable() const { return usable_; }
  // Why the cache is unusable, for a warning; empty when usable.
  const std::string& reason() const { return reason_; }
  // The same without its frame: "<path> is writable by group or others (mode 0777)", for
  // messages about a directory kept by someone else (torch's cache directory).
  const std::string& problem() const { return problem_; }
  // A shell command that makes the directory trusted ("chmod 700 <dir>" for our own
  // directory that others may write), or empty where the fix is another directory.
  const std::string& fix() const { return fix_; }
  // The directory as an absolute path with symlinked parents resolved; all later file
  // operations go through this path, so a parent symlink cannot be redirected afterwards.
  const std::string& dir() const { return dir_; }

  // The path of the verified artifact for (key, suffix), or nullopt on a miss. A bad entry
  // (wrong format, size or hash, a symlink, not ours, group/other-writable) is a miss, so
  // the caller rebuilds it; its files are removed if they are ours.
  std::optional<std::string> lookup(const std::string& key, const std::string& suffix);

  // A fresh path inside <dir>/tmp/ for a compiler to write to, unique across threads and
  // processes. The file is not created. Throws std::runtime_error if the cache is unusable.
  std::string temp_path(const std::string& suffix);

  // Moves produced_file into the cache as the entry for (key, suffix) and returns the
  // artifact's final path. produced_file must come from temp_path(): a file anywhere else
  // may have been opened for writing by someone else before we hashed it, so any other
  // path throws std::invalid_argument. Returns nullopt, never throws, when the cache is
  // unusable or a file operation fails; produced_file is then still there, so the caller
  // can load it directly (and remove it afterwards).
  std::optional<std::string> install(const std::string& key, const std::string& suffix,
                                     const std::string& produced_file);

  // Bytes in cache entries (artifacts and index files, orphans included).
  uint64_t size_bytes() const;
  // Number of committed entries (index files).
  int64_t entry_count() const;
  // Removes every entry and orphaned artifact; leaves other files and tmp/ alone.
  void clear();

 private:
  std::string dir_;
  bool usable_ = false;
  std::string reason_;
  std::string problem_;
  std::string fix_;
};

}  // namespace ember
