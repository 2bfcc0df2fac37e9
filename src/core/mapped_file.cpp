#include "tern/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tern/core/error.h"

namespace tern {

MappedFile MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer;
  // fstat below refuses anything that is not a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw IoError(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(path + ": not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = size_t(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw IoError(path + ": cannot mmap: " + std::strerror(e));
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

static void advise(const uint8_t* base, size_t size, size_t off, size_t len, int how) {
  if (!base || off >= size) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t start = off / page * page;
  const size_t end = std::min(size, off + len);
  madvise(const_cast<uint8_t*>(base) + start, end - start, how);
}

void MappedFile::advise_willneed(size_t offset, size_t len) const {
  advise(data_, size_, offset, len, MADV_WILLNEED);
}
void MappedFile::advise_dontneed(size_t offset, size_t len) const {
  advise(data_, size_, offset, len, MADV_DONTNEED);
}
void MappedFile::advise_random(size_t offset, size_t len) const {
  advise(data_, size_, offset, len, MADV_RANDOM);
}

}  // namespace tern
