// The persistent prefix cache: one checksummed file per cache dir and its
// lock (see kv_persist.h for the format).
#include "tern/kv/kv_persist.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tern/core/log.h"
#include "tern/core/sha256.h"
#include "tern/kv/paged_kv.h"

namespace tern::kv {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'K', 'V', 'C', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kRecordHead = 64;  // block hash + checksum

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("kv");
  return l;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

// The header for kv's model and layout, without n_records and checksum.
std::vector<uint8_t> header_prefix(const PagedKv& kv) {
  const KvConfig& c = kv.config();
  std::vector<uint8_t> h(kMagic, kMagic + 8);
  put<uint32_t>(h, kVersion);
  put<uint32_t>(h, uint32_t(c.model_fingerprint.size()));
  h.insert(h.end(), c.model_fingerprint.begin(), c.model_fingerprint.end());
  put<uint8_t>(h, uint8_t(c.type));
  h.insert(h.end(), 3, 0);
  for (int v : {c.n_layers, c.n_kv_heads, c.head_dim, kv.block_tokens()}) put<int32_t>(h, v);
  put<uint64_t>(h, kv.layout().block_bytes);
  return h;
}

Sha256Digest record_sum(Sha256& sha, const uint8_t* hash, std::span<const uint8_t> payload) {
  sha.update(hash, 32);
  sha.update(payload.data(), payload.size());
  return sha.finish();
}

bool write_all(int fd, const void* p, size_t n) {
  const auto* c = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= size_t(w);
  }
  return true;
}

// Bytes read (short at end of file), or -1 on error.
ssize_t read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<uint8_t*>(p);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, c + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += size_t(r);
  }
  return ssize_t(got);
}

// Whether an open descriptor is a regular file (not a FIFO, device, ...).
bool is_regular(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

std::string temp_path(const std::string& dir) {
  return cache_file_path(dir) + ".tmp";
}

// A snapshot write cut short (SIGKILL, power loss) leaves its temp file
// behind; only the lock holder writes one, so once the lock is ours any temp
// file is stale. A non-regular file there is removed too (never opened).
void remove_stale_temp(const std::string& dir) {
  const std::string tmp = temp_path(dir);
  struct stat st {};
  if (::lstat(tmp.c_str(), &st) != 0) return;
  if (::unlink(tmp.c_str()) == 0) {
    logger()->warn("--cache-dir {}: removed {} ({} MiB) left by a snapshot that was cut short", dir,
                   tmp, st.st_size >> 20);
  } else {
    logger()->warn("--cache-dir {}: cannot remove the stale {}: {}", dir, tmp, strerror(errno));
  }
}

}  // namespace

std::string cache_file_path(const std::string& dir) {
  return (fs::path(dir) / "prefix-cache.tkv").string();
}

// --- Lock ------------------------------------------------------------------

CacheDirLock::CacheDirLock(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("--cache-dir " + dir + ": cannot create it: " + ec.message());
  const std::string path = (fs::path(dir) / "lock").string();
  // O_NONBLOCK | O_NOFOLLOW: a FIFO or a symlink planted as the lock file
  // must neither block start-up nor redirect the pid write elsewhere.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    throw IoError("--cache-dir " + dir + ": cannot open " + path + ": " + strerror(errno));
  if (!is_regular(fd_)) {
    ::close(fd_);
    fd_ = -1;
    throw IoError("--cache-dir " + dir + ": " + path + " is not a regular file");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    (void)!::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw CacheDirInUse("--cache-dir " + dir + " is in use by another tern process (pid " +
                          std::string(pid).substr(0, std::string(pid).find('\n')) +
                          "); give each server its own cache directory");
    }
    throw IoError("--cache-dir " + dir + ": cannot lock " + path + ": " + strerror(err));
  }
  const std::string me = std::to_string(getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
    logger()->warn("--cache-dir {}: cannot write our pid into the lock file", dir);
  }
  remove_stale_temp(dir);
}

CacheDirLock::~CacheDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

// --- Save ------------------------------------------------------------------

PersistStats save_prefix_cache(PagedKv& kv, const std::string& dir, size_t max_bytes,
                               std::chrono::steady_clock::time_point deadline) {
  const auto t0 = std::chrono::steady_clock::now();
  PersistStats r;
  const std::string path = cache_file_path(dir);
  const std::string tmp = temp_path(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);  // normally there already (CacheDirLock)
  // A fresh file: whatever is at the temp path (a FIFO, a symlink) goes first.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    r.failed = true;
    r.message = "cannot create " + tmp + ": " + strerror(errno);
    return r;
  }
  std::vector<uint8_t> head = header_prefix(kv);
  const size_t head_bytes = head.size() + 8 + 32;
  const size_t rec_bytes = kRecordHead + kv.layout().block_bytes;
  bool ok = ::lseek(fd, off_t(head_bytes), SEEK_SET) == off_t(head_bytes);
  int err = ok ? 0 : errno;
  Sha256 sha;
  std::vector<uint8_t> rec(kRecordHead);
  const int64_t visited = kv.export_cached([&](const BlockHash& h, std::span<const uint8_t> b) {
    if (head_bytes + size_t(r.blocks + 1) * rec_bytes > max_bytes) return false;
    if (std::chrono::steady_clock::now() >= deadline) {
      r.timed_out = true;
      return false;
    }
    std::memcpy(rec.data(), h.data(), 32);
    const Sha256Digest sum = record_sum(sha, h.data(), b);
    std::memcpy(rec.data() + 32, sum.data(), 32);
    if (!write_all(fd, rec.data(), rec.size()) || !write_all(fd, b.data(), b.size())) {
      ok = false;
      err = errno;
      return false;
    }
    r.blocks += 1;
    return true;
  });
  if (visited < 0 && ok) {
    ok = false;
    err = EIO;
  }
  if (ok) {
    put<uint64_t>(head, uint64_t(r.blocks));
    const Sha256Digest hs = tern::sha256(head.data(), head.size());
    head.insert(head.end(), hs.begin(), hs.end());
    ok = ::pwrite(fd, head.data(), head.size(), 0) == ssize_t(head.size()) && ::fsync(fd) == 0;
    if (!ok) err = errno;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    r.failed = true;
    r.blocks = 0;
    r.message = "writing " + tmp + " failed: " + strerror(err ? err : EIO) +
                " (the previous cache file, if any, is kept)";
    r.ms = ms_since(t0);
    return r;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);  // makes the rename durable
    ::close(dfd);
  }
  r.bytes = int64_t(head_bytes + size_t(r.blocks) * rec_bytes);
  r.ms = ms_since(t0);
  r.message = "saved " + std::to_string(r.blocks) + " prefix-cache blocks (" +
              std::to_string(r.bytes >> 20) + " MiB) to " + path +
              (r.timed_out ? " (cut short by the time bound)" : "");
  return r;
}

// --- Load ------------------------------------------------------------------

PersistStats load_prefix_cache(PagedKv& kv, const std::string& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  PersistStats r;
  const std::string path = cache_file_path(dir);
  // O_NONBLOCK: opening a FIFO planted here must not wait for a writer
  // (it would hold start-up forever); it is then refused as not regular.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    r.message = errno == ENOENT ? "no prefix cache in " + dir + " yet"
                                : "cannot open " + path + ": " + strerror(errno);
    r.ignored = errno != ENOENT;
    return r;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (!is_regular(fd)) {
    r.ignored = true;
    r.message = path + " is not a regular file; ignoring it (it is replaced at the next save)";
    return r;
  }
  const std::vector<uint8_t> want = header_prefix(kv);
  std::vector<uint8_t> head(want.size() + 8 + 32);
  const ssize_t got = read_all(fd, head.data(), head.size());
  const auto ignore = [&](const std::string& why) {
    r.ignored = true;
    r.message = path + ": " + why + "; ignoring it (it is replaced at the next save)";
    r.ms = ms_since(t0);
    return r;
  };
  if (got < ssize_t(16) || std::memcmp(head.data(), kMagic, 8) != 0)
    return ignore("not a tern prefix-cache file, or truncated");
  uint32_t version = 0, fp_len = 0;
  std::memcpy(&version, head.data() + 8, 4);
  std::memcpy(&fp_len, head.data() + 12, 4);
  if (version != kVersion) return ignore("format version " + std::to_string(version));
  // A file for another model has a header of another length: compare what we can.
  const bool same_len = fp_len == uint32_t(kv.config().model_fingerprint.size());
  if (got != ssize_t(head.size())) {
    return ignore(same_len ? "truncated header" : "written for another model");
  }
  const size_t body = want.size() + 8;
  const Sha256Digest hs = tern::sha256(head.data(), body);
  if (std::memcmp(hs.data(), head.data() + body, 32) != 0) return ignore("header checksum fails");
  if (!same_len || std::memcmp(head.data(), want.data(), 16 + fp_len) != 0)
    return ignore("written for another model file");
  if (std::memcmp(head.data(), want.data(), want.size()) != 0)
    return ignore("written for another KV layout (type, block size or head shape)");
  uint64_t n_records = 0;
  std::memcpy(&n_records, head.data() + want.size(), 8);
  r.bytes = int64_t(head.size());

  const size_t block_bytes = kv.layout().block_bytes;
  std::vector<uint8_t> rec(kRecordHead + block_bytes);
  Sha256 sha;
  BlockHash h;
  uint64_t seen = 0;
  for (; seen < n_records; ++seen) {
    const ssize_t n = read_all(fd, rec.data(), rec.size());
    if (n < 0 || size_t(n) != rec.size()) {
      // The count is the header's claim: the tally saturates so a damaged
      // (huge) one cannot overflow it, on top of records already dropped.
      const uint64_t missing = n_records - seen;
      const uint64_t room = uint64_t(INT64_MAX) - uint64_t(r.dropped);
      r.dropped += int64_t(std::min(missing, room));
      break;
    }
    r.bytes += n;
    const std::span<const uint8_t> payload(rec.data() + kRecordHead, block_bytes);
    const Sha256Digest sum = record_sum(sha, rec.data(), payload);
    if (std::memcmp(sum.data(), rec.data() + 32, 32) != 0) {
      r.dropped += 1;
      continue;
    }
    std::memcpy(h.data(), rec.data(), 32);
    if (kv.import_cached(h, payload)) {
      r.blocks += 1;
    } else {
      r.no_room += 1;
    }
  }
  r.ms = ms_since(t0);
  r.message = "loaded " + std::to_string(r.blocks) + " prefix-cache blocks from " + path;
  if (r.dropped > 0)
    r.message += "; dropped " + std::to_string(r.dropped) + " damaged or missing records";
  if (r.no_room > 0) r.message += "; " + std::to_string(r.no_room) + " did not fit the budgets";
  return r;
}

}  // namespace tern::kv
