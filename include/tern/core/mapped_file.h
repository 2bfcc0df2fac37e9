#pragma once
// A read-only memory-mapped file. Move-only; unmaps on destruction.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tern {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws IoError naming the path if it cannot be opened or mapped.
  static MappedFile open(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tell the kernel a range will be read soon / randomly (advisory only).
  void advise_willneed(size_t offset, size_t len) const;
  void advise_random(size_t offset, size_t len) const;
  // Drop the range's pages from this process's resident set (they are clean
  // file pages: later reads fault them back in from the page cache or disk).
  void advise_dontneed(size_t offset, size_t len) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace tern
