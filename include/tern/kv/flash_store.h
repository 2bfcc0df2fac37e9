#pragma once
// The flash tier's file: one spill file of fixed-size slots (one KV block
// each) under a folder, and a libuv loop on its own thread that performs
// reads and writes asynchronously (uv_fs_read / uv_fs_write on libuv's
// worker pool; completions run on the loop thread).
//
// A slot is made of parts (a block's layer slices). The file is part-major:
//   offset(slot, part) = (part * n_slots + slot) * part_bytes
// so one part of consecutive slots is one contiguous range: a layer of a run
// of spilled blocks comes back in a single read.
//
// The engine thread queues operations, submit()s them, and later wait()s on
// the IoGroup it passed; each operation stores its result (0 or -errno) in
// the status word it was given before its group's count drops. Operations
// come from a pool that grows in chunks, so steady-state I/O allocates
// nothing. The file is removed on destruction; files left by processes that
// no longer exist are removed when a store opens in the same folder.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tern::kv {

enum class IoKind : uint8_t { Read, Write };

// Operations in flight for one purpose (a layer's prefetch, a batch of spills).
// Only touched through FlashStore (its mutex guards `pending`).
struct IoGroup {
  int32_t pending = 0;
};

class FlashStore {
 public:
  struct Options {
    std::string dir;        // created if missing
    size_t part_bytes = 0;  // one layer slice
    int n_parts = 1;        // parts per slot (layers)
    int64_t n_slots = 0;
    std::string file_override;  // tests: use this exact file (e.g. /dev/full); kept at exit
  };

  // Throws KvIoError when the folder or file cannot be created.
  explicit FlashStore(const Options& opts);
  ~FlashStore();  // waits for operations in flight, stops the loop, removes the file
  FlashStore(const FlashStore&) = delete;
  FlashStore& operator=(const FlashStore&) = delete;

  const std::string& path() const { return path_; }
  size_t part_bytes() const { return part_bytes_; }
  int n_parts() const { return n_parts_; }
  int64_t n_slots() const { return n_slots_; }
  int64_t free_slots() const { return int64_t(free_slots_.size()); }
  int64_t alloc_slot();  // -1 when none is free
  void free_slot(int64_t slot);

  // Queue I/O. read: part `part` of `count` consecutive slots from `slot` into
  // dst (count * part_bytes). write: one part of one slot. Buffers must stay
  // valid until the group is waited for. A failing operation stores -errno in
  // *status (successes leave it alone, so set it to 0 first and share it
  // among the operations of one block).
  void read(int64_t slot, int part, int count, void* dst, IoGroup& g, int32_t* status);
  void write(int64_t slot, int part, const void* src, IoGroup& g, int32_t* status);
  void submit();                // hand queued operations to the loop thread
  bool wait(IoGroup& g);        // blocks until g has nothing in flight; true if it blocked
  bool idle(const IoGroup& g);  // nothing in flight for g

  // Test hook: after `after` more operations of `kind` succeed, the next
  // `count` fail with -err without touching the file.
  void inject_fault(IoKind kind, int count, int err, int after = 0);

  // Removes tern-kv-<pid>-*.blocks files in dir whose process is gone.
  static void remove_stale_files(const std::string& dir);

 private:
  struct Op;
  struct Loop;
  Op* new_op();
  void queue(IoKind kind, int64_t offset, size_t len, void* buf, IoGroup& g, int32_t* status);
  void on_async();                        // loop thread: start queued operations
  void complete(Op* op, int32_t status);  // loop thread
  static void on_fs_done(void* req);

  std::string path_;
  bool remove_at_exit_ = true;
  int fd_ = -1;
  size_t part_bytes_ = 0;
  int n_parts_ = 1;
  int64_t n_slots_ = 0;
  std::vector<int64_t> free_slots_;  // engine thread only

  std::mutex mu_;  // guards everything below, and IoGroup::pending
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Op[]>> op_chunks_;
  Op* free_ops_ = nullptr;
  Op* queue_head_ = nullptr;
  Op* queue_tail_ = nullptr;
  int64_t in_flight_ = 0;
  bool stopping_ = false;
  struct Fault {
    int after = 0, count = 0, err = 0;
  } faults_[2];

  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace tern::kv
