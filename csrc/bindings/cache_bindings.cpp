// The disk cache for entries Python writes: ember's own graph cache keeps a compiled
// inference graph's state (python/ember/caches/graph_cache.py) beside the kernels, under the same
// checks (DiskCache: ownership, permissions, content hash verified on every lookup).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "runtime/disk_cache.h"

namespace nb = nanobind;

namespace {

// The verified content of (key, suffix), or None on a miss or an unusable cache.
std::optional<nb::bytes> cache_read(const std::string& dir, const std::string& key, const std::string& suffix) {
  std::string content;
  {
    nb::gil_scoped_release release;
    ember::DiskCache cache(dir);
    if (!cache.usable()) return std::nullopt;
    auto path = cache.lookup(key, suffix);
    if (!path) return std::nullopt;
    // Only we can write the directory, so the file lookup() hashed is the file read here.
    std::ifstream in(*path, std::ios::binary);
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return std::nullopt;
  }
  return nb::bytes(content.data(), content.size());
}

// Stores data as the entry for (key, suffix); false when the cache is unusable or a file
// operation failed (the caller goes on without the entry).
bool cache_write(const std::string& dir, const std::string& key, const std::string& suffix, nb::bytes data) {
  std::string content(data.c_str(), data.size());
  nb::gil_scoped_release release;
  ember::DiskCache cache(dir);
  if (!cache.usable()) return false;
  std::string tmp = cache.temp_path(suffix);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out.good()) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (cache.install(key, suffix, tmp)) return true;
  std::remove(tmp.c_str());
  return false;
}

}  // namespace

void define_cache(nb::module_& m) {
  m.def("cache_read", &cache_read, nb::arg("dir"), nb::arg("key"), nb::arg("suffix"),
        "The verified bytes of a disk cache entry, or None (a miss, a bad entry, an unusable cache).");
  m.def("cache_write", &cache_write, nb::arg("dir"), nb::arg("key"), nb::arg("suffix"), nb::arg("data"),
        "Store bytes as a disk cache entry; False if the cache is unusable or writing failed.");
}
