#include "check.h"
#include "runtime/disk_cache.h"
#include "runtime/sha256.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using ember::DiskCache;

namespace {

// A private scratch directory under /tmp, removed with everything in it at scope exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/ember_cache_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ScratchDir() { remove_tree(path); }

  static void remove_tree(const std::string& p) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
      ::chmod(p.c_str(), 0700);
      if (DIR* d = ::opendir(p.c_str())) {
        std::vector<std::string> names;
        while (struct dirent* e = ::readdir(d)) {
          std::string n = e->d_name;
          if (n != "." && n != "..") names.push_back(n);
        }
        ::closedir(d);
        for (const auto& n : names) remove_tree(p + "/" + n);
      }
      ::rmdir(p.c_str());
    } else {
      ::unlink(p.c_str());
    }
  }
};

void write_file(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  ::lstat(path.c_str(), &st);
  return st.st_mode & 07777;
}

int count_files(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") ++n;
    }
    ::closedir(d);
  }
  return n;
}

std::string key_for(const std::string& name) { return ember::sha256_hex(name).substr(0, 32); }

std::string index_of(const DiskCache& c, const std::string& key, const std::string& suffix) {
  return c.dir() + "/" + key.substr(0, 2) + "/" + key + "." + suffix + ".idx";
}

// Installs content under key and returns the artifact path ("" on failure).
std::string put(DiskCache& c, const std::string& key, const std::string& content) {
  std::string produced = c.temp_path("so");
  write_file(produced, content);
  return c.install(key, "so", produced).value_or("");
}

}  // namespace

TEST(disk_cache_round_trip) {
  ScratchDir scratch;
  DiskCache c(scratch.path + "/a/b/cache");
  CHECK(c.usable());
  CHECK_EQ(c.reason(), "");
  CHECK_EQ(mode_of(c.dir()), mode_t(0700));
  CHECK_EQ(mode_of(scratch.path + "/a"), mode_t(0700));

  std::string key = key_for("round trip");
  std::string produced = c.temp_path("so");
  CHECK_EQ(produced.rfind(c.dir() + "/tmp/", 0), size_t(0));
  write_file(produced, "hello");
  std::optional<std::string> installed = c.install(key, "so", produced);
  CHECK(installed.has_value());
  CHECK(!exists(produced));
  CHECK_EQ(*installed, c.dir() + "/" + key.substr(0, 2) + "/" + key + "-" + ember::sha256_hex("hello") + ".so");
  CHECK_EQ(read_file(*installed), "hello");
  CHECK_EQ(read_file(index_of(c, key, "so")), "ember-cache-v1\n" + ember::sha256_hex("hello") + "\n5\n");

  std::optional<std::string> found = c.lookup(key, "so");
  CHECK(found.has_value());
  CHECK_EQ(found.value_or(""), *installed);
  CHECK_EQ(c.entry_count(), int64_t(1));
  CHECK_EQ(c.size_bytes(), uint64_t(5 + read_file(index_of(c, key, "so")).size()));

  // A second cache object on the same directory sees the entry.
  DiskCache again(scratch.path + "/a/b/cache");
  CHECK(again.usable());
  CHECK_EQ(again.lookup(key, "so").value_or(""), *installed);
}

TEST(disk_cache_miss) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  CHECK(c.usable());
  CHECK(!c.lookup(key_for("never installed"), "so").has_value());
  put(c, key_for("other"), "x");
  CHECK(!c.lookup(key_for("never installed"), "so").has_value());
  CHECK(!c.lookup(key_for("other"), "cubin").has_value());
}

TEST(disk_cache_truncated_artifact_is_removed) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string key = key_for("truncated");
  std::string artifact = put(c, key, "0123456789");
  CHECK(::truncate(artifact.c_str(), 4) == 0);
  CHECK(!c.lookup(key, "so").has_value());
  CHECK(!exists(artifact));
  CHECK(!exists(index_of(c, key, "so")));
  CHECK_EQ(c.entry_count(), int64_t(0));
  // The caller rebuilds, and the entry works again.
  CHECK_EQ(put(c, key, "0123456789"), artifact);
  CHECK(c.lookup(key, "so").has_value());
}

TEST(disk_cache_flipped_byte) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string key = key_for("flipped");
  std::string artifact = put(c, key, "0123456789");
  write_file(artifact, "0123456788");  // same size, same inode
  CHECK(!c.lookup(key, "so").has_value());
  CHECK(!exists(artifact));
}

TEST(disk_cache_bad_index_format) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string key = key_for("format");
  std::string artifact = put(c, key, "content");
  std::string idx = index_of(c, key, "so");
  std::string good = read_file(idx);
  for (std::string bad : {std::string("garbage"), std::string(""), "ember-cache-v2" + good.substr(14),
                          good + "extra", good.substr(0, good.size() - 1), good.substr(0, good.size() - 2) + "6\n"}) {
    write_file(idx, bad);
    ::chmod(idx.c_str(), 0600);
    CHECK(!c.lookup(key, "so").has_value());
    CHECK(!exists(idx));
    put(c, key, "content");
  }
  CHECK(c.lookup(key, "so").has_value());
}

TEST(disk_cache_index_symlink) {
  ScratchDir scratch;
  DiskCache c(scratch.path + "/cache");
  std::string key = key_for("idx link");
  put(c, key, "payload");
  std::string idx = index_of(c, key, "so");
  std::string elsewhere = scratch.path + "/planted.idx";
  CHECK(::rename(idx.c_str(), elsewhere.c_str()) == 0);
  CHECK(::symlink(elsewhere.c_str(), idx.c_str()) == 0);
  CHECK(!c.lookup(key, "so").has_value());
  CHECK(!exists(idx));        // the link is gone
  CHECK(exists(elsewhere));   // its target was not touched
}

TEST(disk_cache_artifact_symlink) {
  ScratchDir scratch;
  DiskCache c(scratch.path + "/cache");
  std::string key = key_for("artifact link");
  std::string artifact = put(c, key, "payload");
  // Even a link to identical bytes is refused: we could not vouch for who controls them.
  std::string copy = scratch.path + "/copy.so";
  write_file(copy, "payload");
  ::chmod(copy.c_str(), 0700);
  CHECK(::unlink(artifact.c_str()) == 0);
  CHECK(::symlink(copy.c_str(), artifact.c_str()) == 0);
  CHECK(!c.lookup(key, "so").has_value());
  CHECK(!exists(artifact));
  CHECK(exists(copy));
}

TEST(disk_cache_group_writable_artifact) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string key = key_for("mode");
  std::string artifact = put(c, key, "payload");
  CHECK_EQ(mode_of(artifact), mode_t(0700));
  ::chmod(artifact.c_str(), 0720);
  CHECK(!c.lookup(key, "so").has_value());
}

TEST(disk_cache_world_writable_dir_is_unusable) {
  ScratchDir scratch;
  ::chmod(scratch.path.c_str(), 0777);
  DiskCache c(scratch.path);
  CHECK(!c.usable());
  CHECK_EQ(c.reason(), "cache dir " + scratch.path +
                           " is writable by group or others (mode 0777); refusing to load shared objects from it");
  CHECK_EQ(c.problem(), scratch.path + " is writable by group or others (mode 0777)");
  CHECK_EQ(c.fix(), "chmod 700 " + scratch.path);  // ours: the user may close it
  CHECK_EQ(mode_of(scratch.path), mode_t(0777));  // not ours to chmod
  CHECK(!c.lookup(key_for("x"), "so").has_value());
  CHECK_THROWS(c.temp_path("so"));
  CHECK(!c.install(key_for("x"), "so", scratch.path + "/tmp/x.so").has_value());
  CHECK_EQ(c.entry_count(), int64_t(0));
}

TEST(disk_cache_symlinked_dir_is_unusable) {
  ScratchDir scratch;
  std::string real = scratch.path + "/real";
  std::string link = scratch.path + "/link";
  ::mkdir(real.c_str(), 0700);
  CHECK(::symlink(real.c_str(), link.c_str()) == 0);
  DiskCache c(link);
  CHECK(!c.usable());
  CHECK(c.reason().find("is a symlink") != std::string::npos);
  CHECK_EQ(c.fix(), "");  // chmod would follow the link: only another directory helps
}

TEST(disk_cache_shared_parent) {
  ScratchDir scratch;
  std::string shared = scratch.path + "/shared";
  ::mkdir(shared.c_str(), 0700);
  ::chmod(shared.c_str(), 0777);
  // Others could rename our directory away and put theirs in its place.
  DiskCache exposed(shared + "/cache");
  CHECK(!exposed.usable());
  CHECK(exposed.reason().find("not sticky") != std::string::npos);
  CHECK_EQ(exposed.fix(), "chmod go-w " + shared);
  // Sticky, like /tmp: only we may rename what we own in it.
  ::chmod(shared.c_str(), 01777);
  DiskCache sticky(shared + "/cache");
  CHECK(sticky.usable());
}

TEST(disk_cache_foreign_owner) {
  if (::geteuid() != 0) {
    // Without chown, a directory root owns stands in for another user's.
    DiskCache c("/");
    CHECK(!c.usable());
    CHECK(c.reason().find("owned by uid 0") != std::string::npos);
    CHECK(!c.lookup(key_for("x"), "so").has_value());
    return;
  }
  ScratchDir scratch;
  std::string foreign = scratch.path + "/foreign";
  ::mkdir(foreign.c_str(), 0700);
  CHECK(::chown(foreign.c_str(), 12345, 12345) == 0);
  DiskCache c(foreign);
  CHECK(!c.usable());
  CHECK(c.reason().find("owned by uid 12345") != std::string::npos);
  CHECK_EQ(c.fix(), "");  // not ours to chmod

  // A foreign index is refused and left alone.
  DiskCache mine(scratch.path + "/mine");
  std::string key = key_for("foreign idx");
  put(mine, key, "payload");
  std::string idx = index_of(mine, key, "so");
  CHECK(::chown(idx.c_str(), 12345, 12345) == 0);
  CHECK(!mine.lookup(key, "so").has_value());
  CHECK(exists(idx));
}

TEST(disk_cache_rejects_bad_keys) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string good = key_for("good");
  CHECK_THROWS(c.lookup("../../../etc/passwd", "so"));
  CHECK_THROWS(c.lookup("0123456789abcde", "so"));                // 15 chars
  CHECK_THROWS(c.lookup(std::string(129, 'a'), "so"));            // too long
  CHECK_THROWS(c.lookup("0123456789ABCDEF", "so"));               // upper case
  CHECK_THROWS(c.lookup("0123456789abcdef/", "so"));
  CHECK_THROWS(c.lookup(good, "s/o"));
  CHECK_THROWS(c.lookup(good, ""));
  CHECK_THROWS(c.lookup(good, "so.idx"));
  CHECK_THROWS(c.temp_path("../so"));
  CHECK_THROWS(c.install("zz", "so", c.temp_path("so")));
  CHECK(!c.lookup(std::string(16, 'a'), "so").has_value());       // bounds are inclusive
  CHECK(!c.lookup(std::string(128, 'a'), "so").has_value());

  // Only files from temp_path() are accepted.
  std::string outside = scratch.path + "/outside.so";
  write_file(outside, "x");
  CHECK_THROWS(c.install(good, "so", outside));
  CHECK_THROWS(c.install(good, "so", c.dir() + "/tmp/../outside.so"));
  CHECK(exists(outside));
}

TEST(disk_cache_concurrent_installs_of_one_key) {
  ScratchDir scratch;
  DiskCache c(scratch.path + "/cache");
  std::string key = key_for("concurrent");
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) results[t] = put(c, key, std::string(100000, 'z'));
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) CHECK_EQ(r, results[0]);
  std::optional<std::string> found = c.lookup(key, "so");
  CHECK(found.has_value());
  CHECK_EQ(found.value_or(""), results[0]);
  CHECK_EQ(read_file(results[0]), std::string(100000, 'z'));
  CHECK_EQ(c.entry_count(), int64_t(1));
  CHECK_EQ(count_files(c.dir() + "/" + key.substr(0, 2)), 2);  // artifact + index
  CHECK_EQ(count_files(c.dir() + "/tmp"), 0);
}

// Different content for one key (a nondeterministic compiler): the last index wins, and
// whatever it names verifies.
TEST(disk_cache_concurrent_installs_differing_content) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string key = key_for("differing");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        put(c, key, std::string(50000, char('a' + t)));
        std::optional<std::string> seen = c.lookup(key, "so");
        CHECK(seen.has_value());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::optional<std::string> found = c.lookup(key, "so");
  CHECK(found.has_value());
  std::string content = read_file(found.value_or(""));
  CHECK_EQ(content.size(), size_t(50000));
  CHECK(found.value_or("").find(ember::sha256_hex(content)) != std::string::npos);
}

TEST(disk_cache_clear) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  for (const char* name : {"one", "two", "three"}) put(c, key_for(name), name);
  CHECK_EQ(c.entry_count(), int64_t(3));
  std::string notes = c.dir() + "/" + key_for("one").substr(0, 2) + "/notes.txt";
  write_file(notes, "not ours to delete");
  c.clear();
  CHECK_EQ(c.entry_count(), int64_t(0));
  CHECK_EQ(c.size_bytes(), uint64_t(0));
  CHECK(exists(notes));
  CHECK(!c.lookup(key_for("one"), "so").has_value());
}

// A failed install leaves the produced file for the caller to load directly.
TEST(disk_cache_failed_install_keeps_produced_file) {
  ScratchDir scratch;
  DiskCache c(scratch.path);
  std::string key = key_for("failed install");
  std::string shard = c.dir() + "/" + key.substr(0, 2);
  ::mkdir(shard.c_str(), 0700);
  ::chmod(shard.c_str(), 0770);  // a shard we cannot trust
  std::string produced = c.temp_path("so");
  write_file(produced, "payload");
  CHECK(!c.install(key, "so", produced).has_value());
  CHECK_EQ(read_file(produced), "payload");
  CHECK(!c.lookup(key, "so").has_value());
  CHECK(!c.install(key, "so", c.temp_path("so")).has_value());  // nothing was produced

  // Failing at the commit, after the artifact was moved: the produced file comes back.
  std::string key2 = key_for("failed commit");
  produced = c.temp_path("so");
  write_file(produced, "payload 2");
  ::chmod((c.dir() + "/tmp").c_str(), 0770);  // no index temp file can be made now
  CHECK(!c.install(key2, "so", produced).has_value());
  ::chmod((c.dir() + "/tmp").c_str(), 0700);
  CHECK_EQ(read_file(produced), "payload 2");
  CHECK(!c.lookup(key2, "so").has_value());
}
