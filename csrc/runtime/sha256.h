// SHA-256 (FIPS 180-4), used to name and verify cached artifacts on disk.
//
// Our own implementation because the core links nothing beyond libc/libstdc++. Speed is
// secondary: the cache hashes files of a few hundred KiB, once per lookup.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t block[64]);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;   // bytes waiting in buffer_, always < 64
  uint64_t total_ = 0;    // message length in bytes
};

// Lower-case hex, 64 characters.
std::string sha256_hex(std::string_view data);

// Hashes a file's content; throws std::runtime_error naming the path if it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace ember
