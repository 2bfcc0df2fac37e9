#pragma once
// Helpers the libFuzzer targets share (see fuzz/CMakeLists.txt).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern::fuzz {

// A broken invariant: libFuzzer reports it as a crash and saves the input.
inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Silences tern's logs: a warning per rejected input would dominate the run.
void quiet_logs();

// A scratch directory for this process, created on first use and removed at
// exit; targets whose parser reads a file or a directory work in it.
const std::string& scratch_dir();

// Writes `bytes` to `path` (replacing it); traps when that fails, since the
// target could not test anything then.
void write_file(const std::string& path, std::span<const uint8_t> bytes);

// Splits `data` at every `sep` byte (n separators: n + 1 parts).
std::vector<std::string_view> split(std::span<const uint8_t> data, char sep);

}  // namespace tern::fuzz
