// Chained block hashes: SHA-256 itself, and that every input that decides a
// block's KV (parent, tokens, extras and their offsets, model, type, block
// size, salt) changes the name.
#include "tern/kv/block_hash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

namespace tern::kv {
namespace {

std::string hex(const BlockHash& h) {
  std::string s;
  char b[3];
  for (uint8_t x : h) std::snprintf(b, sizeof b, "%02x", x), s += b;
  return s;
}

TEST(BlockHash, Sha256KnownAnswers) {
  EXPECT_EQ(hex(hash_string("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(hash_string("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(BlockHash, RootCoversModelTypeBlockSizeAndSalt) {
  BlockHasher h;
  const BlockHash base = h.root("model-a", KvType::Int8Fp8, 32, {});
  EXPECT_EQ(base, h.root("model-a", KvType::Int8Fp8, 32, {}));
  std::set<BlockHash> seen{base};
  EXPECT_TRUE(seen.insert(h.root("model-b", KvType::Int8Fp8, 32, {})).second);
  EXPECT_TRUE(seen.insert(h.root("model-a", KvType::F16, 32, {})).second);
  EXPECT_TRUE(seen.insert(h.root("model-a", KvType::Int8Fp8, 16, {})).second);
  EXPECT_TRUE(seen.insert(h.root("model-a", KvType::Int8Fp8, 32, hash_string("adapter-1"))).second);
  EXPECT_TRUE(seen.insert(h.root("", KvType::Int8Fp8, 32, {})).second);
}

TEST(BlockHash, ChainCoversParentTokensAndExtras) {
  BlockHasher h;
  const BlockHash root = h.root("m", KvType::Int8Fp8, 4, {});
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const BlockHash img = hash_string("image pixels");
  const BlockHash a = h.chain(root, t, {});
  EXPECT_EQ(a, h.chain(root, t, {}));
  std::set<BlockHash> seen{a};
  EXPECT_TRUE(seen.insert(h.chain(a, t, {})).second);  // other parent
  EXPECT_TRUE(seen.insert(h.chain(root, std::vector<int32_t>{1, 2, 4, 3}, {})).second);  // order
  EXPECT_TRUE(seen.insert(h.chain(root, std::vector<int32_t>{1, 2, 3}, {})).second);     // length
  EXPECT_TRUE(seen.insert(h.chain(root, std::vector<int32_t>{1, 2, 3, -4}, {})).second);
  const std::pair<int32_t, BlockHash> e1[] = {{1, img}};
  const std::pair<int32_t, BlockHash> e2[] = {{2, img}};
  const std::pair<int32_t, BlockHash> e3[] = {{1, hash_string("other image")}};
  EXPECT_TRUE(seen.insert(h.chain(root, t, e1)).second);
  EXPECT_TRUE(seen.insert(h.chain(root, t, e2)).second);  // same image, other place
  EXPECT_TRUE(seen.insert(h.chain(root, t, e3)).second);
  // The free function and the incremental hasher agree on plain bytes.
  EXPECT_EQ(sha256("abc", 3), hash_string("abc"));
}

}  // namespace
}  // namespace tern::kv
