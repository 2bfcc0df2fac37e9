#pragma once
// A move-only anonymous memory mapping: the DRAM block arena and the flash
// staging buffers. Pages are committed on first touch, so a large budget
// costs resident memory only as blocks are used.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace tern::kv {

class MappedArena {
 public:
  MappedArena() = default;
  explicit MappedArena(size_t bytes) : n_(bytes) {
    if (bytes == 0) return;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    p_ = static_cast<uint8_t*>(p);
  }
  ~MappedArena() {
    if (p_) munmap(p_, n_);
  }
  MappedArena(MappedArena&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  MappedArena& operator=(MappedArena&& o) noexcept {
    if (this != &o) {
      if (p_) munmap(p_, n_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  MappedArena(const MappedArena&) = delete;
  MappedArena& operator=(const MappedArena&) = delete;

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace tern::kv
