#include "fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tern/core/log.h"

namespace tern::fuzz {

void quiet_logs() {
  log::init("off");
}

namespace {
struct Scratch {
  std::string dir;
  Scratch() {
    const auto base = std::filesystem::temp_directory_path();
    dir = (base / ("tern-fuzz-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
}  // namespace

const std::string& scratch_dir() {
  static const Scratch s;
  return s.dir;
}

void write_file(const std::string& path, std::span<const uint8_t> bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  check(f != nullptr);
  const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  check(n == bytes.size());
  check(std::fclose(f) == 0);
}

std::vector<std::string_view> split(std::span<const uint8_t> data, char sep) {
  std::vector<std::string_view> parts;
  const std::string_view s(reinterpret_cast<const char*>(data.data()), data.size());
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

}  // namespace tern::fuzz
