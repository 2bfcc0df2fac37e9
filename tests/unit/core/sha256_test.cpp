// SHA-256 against the FIPS 180-2 / NIST test vectors, one-shot and in pieces.
#include "tern/core/sha256.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionAs) {
  const std::string a(1000000, 'a');
  const std::string want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  EXPECT_EQ(to_hex(sha256(a)), want);
  Sha256 h;  // the same in 1000-byte pieces
  for (int i = 0; i < 1000; ++i) h.update(a.data() + 1000 * i, 1000);
  EXPECT_EQ(to_hex(h.finish()), want);
}

TEST(Sha256, IncrementalMatchesOneShotForAnySplit) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(3001);
  for (auto& b : data) b = uint8_t(rng());
  const Sha256Digest whole = sha256(data.data(), data.size());
  Sha256 h;  // reused: finish() starts the next message
  for (int trial = 0; trial < 20; ++trial) {
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % 200);  // empty pieces too
      h.update(data.data() + at, n);
      at += n;
    }
    EXPECT_EQ(h.finish(), whole) << trial;
  }
}

TEST(Sha256, ResetAndMoveAndU32) {
  Sha256 h;
  h.update("garbage");
  h.reset();
  h.update("ab").update("c");
  Sha256 moved = std::move(h);
  EXPECT_EQ(moved.finish(), sha256("abc"));
  moved.update_u32(0x64636261);  // "abcd" little-endian on every host
  EXPECT_EQ(moved.finish(), sha256("abcd"));
}

}  // namespace
}  // namespace tern
