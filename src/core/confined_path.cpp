#include "tern/core/confined_path.h"

#include <filesystem>

namespace tern {
namespace fs = std::filesystem;
namespace {

// Is `p` (both lexically normal and absolute) `root` or below it?
bool is_under(const fs::path& p, const fs::path& root) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (r->empty()) continue;  // a trailing separator on root
    if (q == p.end() || *q != *r) return false;
  }
  return true;
}

[[noreturn]] void refuse(PathRefusal why, const std::string& what) {
  throw ConfinedPathError(why, what);
}

}  // namespace

std::string resolve_confined_path(const std::string& root_dir, const std::string& path) {
  if (path.empty()) refuse(PathRefusal::Empty, "empty path");
  if (path.find('\0') != std::string::npos)
    refuse(PathRefusal::Nul, "the path contains a NUL byte");
  std::error_code ec;
  const fs::path root = fs::canonical(root_dir, ec);
  if (ec) refuse(PathRefusal::NoRoot, "the directory is not available");
  const fs::path joined =
      (fs::path(path).is_absolute() ? fs::path(path) : root / path).lexically_normal();
  if (!is_under(joined, root)) refuse(PathRefusal::Outside, "the path is outside the directory");
  const fs::path real = fs::canonical(joined, ec);
  if (ec) refuse(PathRefusal::NotFound, "file not found: " + path);
  if (!is_under(real, root))
    refuse(PathRefusal::OutsideByLink, "the path is outside the directory (through a symlink)");
  if (!fs::is_regular_file(real, ec))
    refuse(PathRefusal::NotRegular, "not a regular file: " + path);
  return real.string();
}

}  // namespace tern
