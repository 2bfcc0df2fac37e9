#include "tern/vision/embedding_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "media_test_util.h"

namespace tern::vision::testing {
namespace {

namespace fs = std::filesystem;

// Key i (pixels differ) and rows whose values say which key they belong to.
EmbeddingKey key(int i) {
  EmbeddingKey k;
  k.pixels = sha256("picture " + std::to_string(i));
  k.projector = sha256("projector");
  k.preprocess = sha256("preprocess");
  return k;
}
Embeddings rows(int i, int n_tokens = 4, int n_embd = 64) {
  Embeddings e{n_tokens, n_embd, std::vector<float>(size_t(n_tokens) * n_embd)};
  for (size_t j = 0; j < e.data.size(); ++j) e.data[j] = float(i) + float(j) * 0.25f;
  return e;
}
constexpr size_t kRowBytes = 4 * 64 * sizeof(float);  // 1 KiB

std::vector<fs::path> entry_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

TEST(EmbeddingCache, KeysSeparatePictureProjectorAndPreprocessing) {
  EmbeddingKey a = key(1), b = a, c = a, d = a;
  b.pixels = key(2).pixels;
  c.projector = sha256("other projector");
  d.preprocess = sha256("other settings");
  for (const EmbeddingKey& k : {b, c, d}) EXPECT_NE(k.digest(), a.digest());
  EXPECT_EQ(key(1).digest(), a.digest());
  VisionConfig cfg;
  cfg.projector = ProjectorType::Gemma3;
  cfg.image_size = 896;
  const Sha256Digest f = preprocess_fingerprint(cfg);
  EXPECT_EQ(preprocess_fingerprint(cfg), f);
  cfg.image_mean[1] = 0.45f;
  EXPECT_NE(preprocess_fingerprint(cfg), f);
  TempDir tmp;
  write_file(tmp.path() / "a.gguf", Bytes{1, 2, 3});
  write_file(tmp.path() / "b.gguf", Bytes{1, 2, 4});
  EXPECT_NE(projector_fingerprint((tmp.path() / "a.gguf").string()),
            projector_fingerprint((tmp.path() / "b.gguf").string()));
}

TEST(EmbeddingCache, DramIsAnLruUnderItsByteBudget) {
  EmbeddingCache cache({.dram_bytes = kRowBytes * 2 + kRowBytes / 2});
  EXPECT_EQ(cache.find(key(1)), nullptr);
  const auto e1 = cache.insert(key(1), rows(1));
  cache.insert(key(2), rows(2));
  ASSERT_NE(cache.find(key(1)), nullptr);  // 1 is now the most recent
  cache.insert(key(3), rows(3));           // evicts 2
  EXPECT_EQ(cache.find(key(2)), nullptr);
  const auto got = cache.find(key(1));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->data, rows(1).data);
  EXPECT_EQ(got, e1);  // the same object, not a copy
  const EmbeddingCacheStats s = cache.stats();
  EXPECT_EQ(s.dram.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.dram.evictions, 1u);
  EXPECT_EQ(s.dram.entries, 2u);
  EXPECT_EQ(s.dram.bytes, 2 * kRowBytes);
  EXPECT_EQ(s.inserts, 3u);
  EXPECT_FALSE(s.flash_enabled);
}

TEST(EmbeddingCache, AnEntryInUseOutlivesItsEviction) {
  EmbeddingCache cache({.dram_bytes = kRowBytes});
  const auto held = cache.insert(key(1), rows(1));
  cache.insert(key(2), rows(2));  // evicts 1 from the cache
  EXPECT_EQ(cache.find(key(1)), nullptr);
  EXPECT_EQ(held->data, rows(1).data);  // the reader's copy is intact
}

TEST(EmbeddingCache, GetOrEncodeEncodesOnce) {
  EmbeddingCache cache({});
  int calls = 0;
  bool hit = true;
  auto enc = [&] {
    ++calls;
    return rows(7);
  };
  cache.get_or_encode(key(7), enc, &hit);
  EXPECT_FALSE(hit);
  const auto e = cache.get_or_encode(key(7), enc, &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(e->data, rows(7).data);
  EXPECT_THROW(cache.insert(key(8), Embeddings{2, 2, {1.0f}}), InvalidArgument);
}

TEST(EmbeddingCache, FlashFindsEntriesAfterEvictionAndAfterARestart) {
  TempDir tmp;
  const EmbeddingCacheOptions opts{.dram_bytes = kRowBytes, .flash_dir = tmp.path().string()};
  {
    EmbeddingCache cache(opts);
    cache.insert(key(1), rows(1));
    cache.insert(key(2), rows(2));  // 1 leaves DRAM
    const auto back = cache.find(key(1));
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(back->data, rows(1).data);
    EXPECT_EQ(back->n_tokens, 4);
    const EmbeddingCacheStats s = cache.stats();
    EXPECT_TRUE(s.flash_enabled);
    EXPECT_EQ(s.flash.hits, 1u);
    EXPECT_EQ(s.flash.entries, 2u);
    EXPECT_EQ(s.flash.bytes, 2 * (kRowBytes + 88));
  }
  EmbeddingCache again(opts);  // a restart
  EXPECT_EQ(again.stats().flash.entries, 2u);
  for (int i : {1, 2}) {
    const auto e = again.find(key(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->data, rows(i).data);
  }
  EXPECT_EQ(again.stats().flash.hits, 2u);
  EXPECT_EQ(again.find(key(3)), nullptr);
}

TEST(EmbeddingCache, DamagedFlashEntriesAreDroppedNeverUsed) {
  TempDir tmp;
  const EmbeddingCacheOptions opts{.dram_bytes = 0, .flash_dir = tmp.path().string()};
  {
    EmbeddingCache cache(opts);
    for (int i = 1; i <= 4; ++i) cache.insert(key(i), rows(i));
  }
  const auto name = [&](int i) { return tmp.path() / (to_hex(key(i).digest()) + ".emb"); };
  {  // 1: a flipped bit in the rows
    std::fstream f(name(1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put(char(0x5a));
  }
  fs::resize_file(name(2), 100);                                          // 2: cut short
  fs::copy_file(name(4), name(3), fs::copy_options::overwrite_existing);  // 3: another key's file
  EmbeddingCache cache(opts);
  for (int i : {1, 2, 3}) {
    EXPECT_EQ(cache.find(key(i)), nullptr) << i;
    EXPECT_FALSE(fs::exists(name(i))) << i;
  }
  ASSERT_NE(cache.find(key(4)), nullptr);
  EXPECT_EQ(cache.find(key(4))->data, rows(4).data);
  const EmbeddingCacheStats s = cache.stats();
  EXPECT_EQ(s.flash_dropped, 3u);
  EXPECT_EQ(s.flash.entries, 1u);
  EXPECT_EQ(s.misses, 3u);
}

TEST(EmbeddingCache, FlashKeepsItsBudget) {
  TempDir tmp;
  EmbeddingCache cache(
      {.dram_bytes = 0, .flash_dir = tmp.path().string(), .flash_bytes = 2 * (kRowBytes + 88)});
  for (int i = 1; i <= 3; ++i) cache.insert(key(i), rows(i));
  EXPECT_EQ(entry_files(tmp.path()).size(), 2u);
  EXPECT_EQ(cache.find(key(1)), nullptr);
  EXPECT_NE(cache.find(key(3)), nullptr);
  EXPECT_EQ(cache.stats().flash.evictions, 1u);
}

TEST(EmbeddingCache, WriteErrorsFallBackToDram) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "flash";
  EmbeddingCache cache({.flash_dir = dir.string()});
  EXPECT_TRUE(cache.stats().flash_enabled);
  fs::remove_all(dir);  // the disk goes away
  const auto e = cache.insert(key(1), rows(1));
  EXPECT_EQ(e->data, rows(1).data);
  EXPECT_NE(cache.find(key(1)), nullptr);
  EmbeddingCacheStats s = cache.stats();
  EXPECT_EQ(s.flash_write_errors, 1u);
  EXPECT_FALSE(s.flash_enabled);
  cache.insert(key(2), rows(2));  // no more attempts
  EXPECT_EQ(cache.stats().flash_write_errors, 1u);

  write_file(tmp.path() / "file", Bytes{1});  // a flash "directory" that is a file
  EmbeddingCache other({.flash_dir = (tmp.path() / "file").string()});
  EXPECT_FALSE(other.stats().flash_enabled);
  EXPECT_NE(other.insert(key(1), rows(1)), nullptr);
}

TEST(EmbeddingCache, ConcurrentReadersAndWriters) {
  TempDir tmp;
  EmbeddingCache cache({.dram_bytes = kRowBytes * 3, .flash_dir = tmp.path().string()});
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int n = 0; n < 200; ++n) {
        const int i = (n * 7 + t) % 9;
        const auto e = cache.get_or_encode(key(i), [&] { return rows(i); });
        if (e->data != rows(i).data) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  const EmbeddingCacheStats s = cache.stats();
  EXPECT_EQ(s.dram.hits + s.flash.hits + s.misses, 800u);
  EXPECT_LE(s.dram.bytes, kRowBytes * 3);
}

}  // namespace
}  // namespace tern::vision::testing
