// The spill file and its libuv I/O thread: asynchronous round trips of
// parts (layers), runs of slots read at once, injected faults, a real ENOSPC from /dev/full,
// folders that cannot be created, and cleanup of our files and of stale ones.
#include "tern/kv/flash_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "kv_test_util.h"
#include "tern/kv/kv_types.h"

namespace tern::kv {
namespace {

using test::TempDir;

TEST(FlashStore, AsyncRoundTripOfPartsAndRuns) {
  TempDir dir("roundtrip");
  const size_t part = 1000;
  const int parts = 7, n = 300;  // more operations than one pool chunk
  FlashStore fs({dir.path, part, parts, n, {}});
  EXPECT_EQ(dir.n_files(), 1u);
  std::vector<uint8_t> data(size_t(n) * parts * part);  // (slot, part, bytes)
  std::mt19937 rng(1);
  for (auto& b : data) b = uint8_t(rng());
  auto at = [&](int64_t slot, int p) {
    return data.data() + (size_t(slot) * parts + size_t(p)) * part;
  };
  IoGroup g;
  std::vector<int32_t> status(size_t(n), 0);
  std::vector<int64_t> slots;
  for (int i = 0; i < n; ++i) {
    slots.push_back(fs.alloc_slot());
    for (int p = 0; p < parts; ++p)
      fs.write(slots.back(), p, at(slots.back(), p), g, &status[size_t(i)]);
  }
  EXPECT_EQ(fs.alloc_slot(), -1);
  fs.submit();
  fs.wait(g);
  EXPECT_TRUE(fs.idle(g));
  for (int32_t s : status) ASSERT_EQ(s, 0);
  // Part 3 of every slot, one slot at a time in reverse order ...
  std::vector<uint8_t> back(size_t(n) * part);
  for (int64_t s = n - 1; s >= 0; --s)
    fs.read(s, 3, 1, back.data() + size_t(s) * part, g, &status[size_t(s)]);
  fs.submit();
  fs.wait(g);
  for (int64_t s = 0; s < n; ++s) {
    ASSERT_EQ(status[size_t(s)], 0);
    ASSERT_EQ(std::memcmp(back.data() + size_t(s) * part, at(s, 3), part), 0) << s;
  }
  // ... and part 5 of slots 10..59 as one run.
  int32_t st = 0;
  fs.read(10, 5, 50, back.data(), g, &st);
  fs.wait(g);
  ASSERT_EQ(st, 0);
  for (int64_t s = 10; s < 60; ++s)
    ASSERT_EQ(std::memcmp(back.data() + size_t(s - 10) * part, at(s, 5), part), 0);
  fs.free_slot(slots[7]);
  EXPECT_EQ(fs.free_slots(), 1);
}

TEST(FlashStore, InjectedFaultsHitExactlyTheChosenOperations) {
  TempDir dir("inject");
  FlashStore fs({dir.path, 4096, 1, 8, {}});
  std::vector<uint8_t> buf(4096, 7);
  IoGroup g;
  int32_t st[5] = {};
  fs.inject_fault(IoKind::Write, 1, ENOSPC, 2);
  for (int i = 0; i < 5; ++i) fs.write(i, 0, buf.data(), g, &st[i]);
  fs.submit();
  fs.wait(g);
  EXPECT_EQ(st[0], 0);
  EXPECT_EQ(st[1], 0);
  EXPECT_EQ(st[2], -ENOSPC);
  EXPECT_EQ(st[3], 0);
  EXPECT_EQ(st[4], 0);
  fs.inject_fault(IoKind::Read, 2, EIO);
  for (int i = 0; i < 3; ++i) st[i] = 0, fs.read(i, 0, 1, buf.data(), g, &st[i]);
  fs.wait(g);  // wait() submits what was queued
  EXPECT_EQ(st[0], -EIO);
  EXPECT_EQ(st[1], -EIO);
  EXPECT_EQ(st[2], 0);
}

TEST(FlashStore, DiskFullIsAnErrorStatusNotACrash) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  FlashStore fs({"", 4096, 1, 4, "/dev/full"});
  std::vector<uint8_t> buf(4096, 1);
  IoGroup g;
  int32_t st = 0;
  fs.write(0, 0, buf.data(), g, &st);
  fs.submit();
  fs.wait(g);
  EXPECT_EQ(st, -ENOSPC);
}

TEST(FlashStore, UncreatableFolderThrowsKvIoError) {
  TempDir dir("uncreatable");
  const std::string file = dir.path + "/plain-file";
  std::ofstream(file) << "x";
  try {
    FlashStore fs({file + "/kv", 4096, 1, 4, {}});
    FAIL() << "expected KvIoError";
  } catch (const KvIoError& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/kv"), std::string::npos) << e.what();
  }
}

TEST(FlashStore, RemovesItsFileAndStaleFilesOfDeadProcesses) {
  TempDir dir("stale");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // now a pid that no process has
  const std::string stale = dir.path + "/tern-kv-" + std::to_string(child) + "-0.blocks";
  const std::string alive = dir.path + "/tern-kv-1-0.blocks";  // pid 1 always exists
  const std::string other = dir.path + "/notes.txt";
  for (const auto& p : {stale, alive, other}) std::ofstream(p) << "x";
  {
    FlashStore fs({dir.path, 4096, 1, 4, {}});
    EXPECT_FALSE(std::filesystem::exists(stale));
    EXPECT_TRUE(std::filesystem::exists(alive));
    EXPECT_TRUE(std::filesystem::exists(fs.path()));
    EXPECT_EQ(dir.n_files(), 3u);
  }
  EXPECT_EQ(dir.n_files(), 2u);  // ours is gone, the others untouched
  EXPECT_TRUE(std::filesystem::exists(other));
}

}  // namespace
}  // namespace tern::kv
