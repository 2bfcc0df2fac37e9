#include "testutil.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace tern::test {

std::string source_dir() {
  if (const char* s = std::getenv("TERN_SOURCE_DIR")) return s;
#ifdef TERN_SOURCE_DIR
  return TERN_SOURCE_DIR;
#else
  return ".";
#endif
}

std::string fixture_path(const std::string& name) {
  return source_dir() + "/tests/fixtures/" + name;
}

std::string default_model_path() {
  if (const char* s = std::getenv("TERN_MODEL")) return s;
  return source_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::string gemma3_model_path() {
  if (const char* s = std::getenv("TERN_GEMMA3_MODEL")) return s;
  return source_dir() + "/models/gemma-3-270m-it-Q4_K_M.gguf";
}

bool file_exists(const std::string& path) {
  return std::filesystem::exists(path);
}

namespace {
// The per-process folder behind temp_path(), removed with everything in it
// when the process exits: ctest runs each test in a process of its own, and
// a suite that left its generated models behind filled CI's disk. Only the
// process that made it removes it (a forked child's exit must not).
struct ProcessTempDir {
  std::string path;
  pid_t owner = getpid();
  ProcessTempDir() {
    auto d = std::filesystem::temp_directory_path() / ("tern-test-" + std::to_string(owner));
    std::filesystem::create_directories(d);
    path = d.string();
  }
  ~ProcessTempDir() {
    if (getpid() != owner) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

std::string temp_path(const std::string& name) {
  static const ProcessTempDir dir;
  return dir.path + "/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

std::time_t utc_time(const std::string& text, const char* fmt) {
  std::tm tm{};
  std::istringstream(text) >> std::get_time(&tm, fmt);
  return timegm(&tm);
}

}  // namespace tern::test
