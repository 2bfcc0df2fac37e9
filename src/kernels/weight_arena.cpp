// WeightArena: one huge-page-backed region for a model's packed weights.
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "tern/kernels/packed.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tern::kernels {
namespace {
constexpr size_t kHugePage = size_t(2) << 20;  // x86-64's transparent huge page
constexpr size_t kSliceAlign = 64;
}  // namespace

WeightArena::WeightArena(size_t bytes) : size_((bytes + kHugePage - 1) / kHugePage * kHugePage) {
  if (size_ == 0) return;
#if defined(__linux__)
  // Map one huge page more than needed, so the region can start on a huge
  // page boundary (where the kernel can back it with 2 MiB pages); ask for
  // huge pages before the first touch, so they are taken at fault time.
  mapped_ = size_ + kHugePage;
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<uint8_t*>(p);
  const uintptr_t a = (reinterpret_cast<uintptr_t>(base_) + kHugePage - 1) / kHugePage * kHugePage;
  begin_ = reinterpret_cast<uint8_t*>(a);
#if defined(MADV_HUGEPAGE)
  madvise(begin_, size_, MADV_HUGEPAGE);  // a hint: failure leaves plain pages
#endif
#else
  base_ = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, size_));
  if (!base_) throw std::bad_alloc();
  std::memset(base_, 0, size_);
  begin_ = base_;
#endif
}

WeightArena::~WeightArena() {
  if (!base_) return;
#if defined(__linux__)
  munmap(base_, mapped_);
#else
  std::free(base_);
#endif
}

WeightArena::WeightArena(WeightArena&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      mapped_(std::exchange(o.mapped_, 0)),
      begin_(std::exchange(o.begin_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      used_(std::exchange(o.used_, 0)) {}

WeightArena& WeightArena::operator=(WeightArena&& o) noexcept {
  if (this != &o) {
    WeightArena old(std::move(*this));
    base_ = std::exchange(o.base_, nullptr);
    mapped_ = std::exchange(o.mapped_, 0);
    begin_ = std::exchange(o.begin_, nullptr);
    size_ = std::exchange(o.size_, 0);
    used_ = std::exchange(o.used_, 0);
  }
  return *this;
}

uint8_t* WeightArena::take(size_t bytes) {
  const size_t at = (used_ + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  assert(at + bytes <= size_);
  used_ = at + bytes;
  return begin_ + at;
}

}  // namespace tern::kernels
