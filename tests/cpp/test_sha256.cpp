#include "check.h"
#include "runtime/sha256.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using ember::sha256_file_hex;
using ember::sha256_hex;

TEST(sha256_standard_vectors) {
  CHECK_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                      "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
           "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK_EQ(sha256_hex(std::string(1000000, 'a')),
           "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Feeding the same bytes in uneven pieces must not change the digest (buffer boundaries).
TEST(sha256_incremental_matches_one_shot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(char(i * 7 + 3));
  for (size_t piece : {1, 3, 55, 56, 63, 64, 65, 127}) {
    ember::Sha256 h;
    for (size_t at = 0; at < data.size(); at += piece) h.update(data.substr(at, piece));
    CHECK_EQ(h.hex_digest(), sha256_hex(data));
  }
}

TEST(sha256_file) {
  char path[] = "/tmp/ember_sha_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE* f = fdopen(fd, "w");
  std::fputs("abc", f);
  std::fclose(f);
  CHECK_EQ(sha256_file_hex(path), sha256_hex("abc"));
  std::remove(path);
  CHECK_THROWS(sha256_file_hex(path));
}
