// The flash tier's spill file and its libuv I/O thread (see flash_store.h).
#include "tern/kv/flash_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tern/core/log.h"
#include "tern/kv/kv_types.h"

namespace tern::kv {
namespace fs = std::filesystem;
namespace {

constexpr int kOpChunk = 256;
constexpr char kPrefix[] = "tern-kv-";
constexpr char kSuffix[] = ".blocks";

std::atomic<uint64_t> g_file_counter{0};

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("kv");
  return l;
}

// "tern-kv-<pid>-<n>.blocks" -> pid, or -1.
long owner_pid(const std::string& name) {
  const std::string pre = kPrefix, suf = kSuffix;
  if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0) {
    return -1;
  }
  const std::string mid = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  const size_t dash = mid.find('-');
  if (dash == 0 || dash == std::string::npos) return -1;
  long pid = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (mid[i] < '0' || mid[i] > '9') return -1;
    pid = pid * 10 + (mid[i] - '0');
    if (pid > (1L << 30)) return -1;
  }
  return pid;
}

}  // namespace

struct FlashStore::Op {
  uv_fs_t req;
  uv_buf_t buf;
  IoKind kind;
  int64_t offset;
  size_t len;
  IoGroup* group;
  int32_t* status;
  FlashStore* store;
  Op* next;
};

struct FlashStore::Loop {
  uv_loop_t loop;
  uv_async_t async;
};

void FlashStore::remove_stale_files(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const long pid = owner_pid(name);
    if (pid <= 0 || pid == long(getpid())) continue;
    if (kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    if (fs::remove(it->path(), rm))
      logger()->info("removed stale KV spill file {}", it->path().string());
  }
}

FlashStore::FlashStore(const Options& o)
    : part_bytes_(o.part_bytes), n_parts_(o.n_parts), n_slots_(o.n_slots) {
  if (o.part_bytes == 0 || o.n_parts < 1 || o.n_slots <= 0) {
    throw InvalidArgument("KV flash tier: empty slot size or count");
  }
  if (o.file_override.empty()) {
    std::error_code ec;
    fs::create_directories(o.dir, ec);
    if (ec) throw KvIoError("KV flash folder " + o.dir + ": cannot create it: " + ec.message());
    remove_stale_files(o.dir);
    path_ = (fs::path(o.dir) / (kPrefix + std::to_string(getpid()) + "-" +
                                std::to_string(g_file_counter.fetch_add(1)) + kSuffix))
                .string();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } else {
    path_ = o.file_override;
    remove_at_exit_ = false;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd_ < 0)
    throw KvIoError("KV spill file " + path_ + ": cannot open it: " + std::strerror(errno));

  free_slots_.reserve(size_t(n_slots_));
  for (int64_t s = n_slots_ - 1; s >= 0; --s) free_slots_.push_back(s);

  loop_ = std::make_unique<Loop>();
  uv_loop_init(&loop_->loop);
  loop_->async.data = this;
  uv_async_init(&loop_->loop, &loop_->async,
                [](uv_async_t* a) { static_cast<FlashStore*>(a->data)->on_async(); });
  thread_ = std::thread([this] { uv_run(&loop_->loop, UV_RUN_DEFAULT); });
}

FlashStore::~FlashStore() {
  submit();  // nothing queued may be left behind unsubmitted
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0 && queue_head_ == nullptr; });
    stopping_ = true;
  }
  uv_async_send(&loop_->async);
  thread_.join();
  uv_loop_close(&loop_->loop);
  ::close(fd_);
  if (remove_at_exit_) ::unlink(path_.c_str());
}

int64_t FlashStore::alloc_slot() {
  if (free_slots_.empty()) return -1;
  const int64_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void FlashStore::free_slot(int64_t slot) {
  free_slots_.push_back(slot);
}

FlashStore::Op* FlashStore::new_op() {  // called with mu_ held
  if (!free_ops_) {
    op_chunks_.push_back(std::make_unique<Op[]>(kOpChunk));
    Op* c = op_chunks_.back().get();
    for (int i = 0; i < kOpChunk; ++i) c[i].next = i + 1 < kOpChunk ? &c[i + 1] : nullptr;
    free_ops_ = c;
  }
  Op* op = free_ops_;
  free_ops_ = op->next;
  return op;
}

void FlashStore::queue(IoKind kind, int64_t offset, size_t len, void* buf, IoGroup& g,
                       int32_t* status) {
  std::lock_guard lock(mu_);
  Op* op = new_op();
  op->buf = uv_buf_init(static_cast<char*>(buf), unsigned(len));
  op->kind = kind;
  op->offset = offset;
  op->len = len;
  op->group = &g;
  op->status = status;
  op->store = this;
  op->next = nullptr;
  (queue_tail_ ? queue_tail_->next : queue_head_) = op;
  queue_tail_ = op;
  g.pending += 1;
  in_flight_ += 1;
}

void FlashStore::read(int64_t slot, int part, int count, void* dst, IoGroup& g, int32_t* status) {
  queue(IoKind::Read, (int64_t(part) * n_slots_ + slot) * int64_t(part_bytes_),
        size_t(count) * part_bytes_, dst, g, status);
}

void FlashStore::write(int64_t slot, int part, const void* src, IoGroup& g, int32_t* status) {
  queue(IoKind::Write, (int64_t(part) * n_slots_ + slot) * int64_t(part_bytes_), part_bytes_,
        const_cast<void*>(src), g, status);
}

void FlashStore::submit() {
  bool any;
  {
    std::lock_guard lock(mu_);
    any = queue_head_ != nullptr;
  }
  if (any) uv_async_send(&loop_->async);
}

bool FlashStore::wait(IoGroup& g) {
  std::unique_lock lock(mu_);
  if (g.pending == 0) return false;
  if (queue_head_) {  // never wait on operations nobody submitted
    lock.unlock();
    uv_async_send(&loop_->async);
    lock.lock();
  }
  cv_.wait(lock, [&] { return g.pending == 0; });
  return true;
}

bool FlashStore::idle(const IoGroup& g) {
  std::lock_guard lock(mu_);
  return g.pending == 0;
}

void FlashStore::inject_fault(IoKind kind, int count, int err, int after) {
  std::lock_guard lock(mu_);
  faults_[int(kind)] = Fault{after, count, err};
}

void FlashStore::on_async() {
  Op* ops;
  bool stop;
  {
    std::lock_guard lock(mu_);
    ops = queue_head_;
    queue_head_ = queue_tail_ = nullptr;
    stop = stopping_;
  }
  while (ops) {
    Op* op = ops;
    ops = ops->next;
    int injected = 0;
    {
      std::lock_guard lock(mu_);
      Fault& f = faults_[int(op->kind)];
      if (f.count > 0) {
        if (f.after > 0) {
          --f.after;
        } else {
          --f.count;
          injected = -f.err;
        }
      }
    }
    if (injected != 0) {
      complete(op, injected);
      continue;
    }
    op->req.data = op;
    const int r = op->kind == IoKind::Read
                      ? uv_fs_read(&loop_->loop, &op->req, fd_, &op->buf, 1, op->offset,
                                   [](uv_fs_t* q) { on_fs_done(q); })
                      : uv_fs_write(&loop_->loop, &op->req, fd_, &op->buf, 1, op->offset,
                                    [](uv_fs_t* q) { on_fs_done(q); });
    if (r < 0) {
      uv_fs_req_cleanup(&op->req);
      complete(op, r);
    }
  }
  if (stop) uv_close(reinterpret_cast<uv_handle_t*>(&loop_->async), nullptr);
}

void FlashStore::on_fs_done(void* req) {
  uv_fs_t* r = static_cast<uv_fs_t*>(req);
  Op* op = static_cast<Op*>(r->data);
  const ssize_t n = r->result;
  uv_fs_req_cleanup(r);
  // A short transfer is an error too: a block is all or nothing.
  const int32_t st = n == ssize_t(op->len) ? 0
                     : n < 0               ? int32_t(n)
                                           : (op->kind == IoKind::Write ? -ENOSPC : -EIO);
  op->store->complete(op, st);
}

void FlashStore::complete(Op* op, int32_t status) {
  if (status != 0) *op->status = status;
  {
    std::lock_guard lock(mu_);
    op->group->pending -= 1;
    in_flight_ -= 1;
    op->next = free_ops_;
    free_ops_ = op;
  }
  cv_.notify_all();
}

}  // namespace tern::kv
