#include "tern/server/static_files.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tern::server {
namespace fs = std::filesystem;

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Relative path inside the root, or "" if the path is not acceptable.
std::string safe_relative(std::string_view path) {
  if (path.empty() || path.front() != '/') return {};
  if (path == "/") return "index.html";
  std::string rel(path.substr(1));
  if (rel.find('\\') != std::string::npos || rel.find('\0') != std::string::npos) return {};
  std::stringstream ss(rel);
  std::string seg;
  while (std::getline(ss, seg, '/'))
    if (seg.empty() || seg == "." || seg == ".." || seg.front() == '.') return {};
  if (rel.back() == '/') return {};
  return rel;
}

}  // namespace

StaticFiles::StaticFiles(std::string root) {
  if (root.empty()) return;
  std::error_code ec;
  fs::path c = fs::canonical(root, ec);
  if (!ec && is_dir(c)) root_ = c.string();
}

std::string StaticFiles::content_type_for(std::string_view p) {
  if (ends_with(p, ".html")) return "text/html; charset=utf-8";
  if (ends_with(p, ".js") || ends_with(p, ".mjs")) return "text/javascript; charset=utf-8";
  if (ends_with(p, ".css")) return "text/css; charset=utf-8";
  if (ends_with(p, ".json")) return "application/json";
  if (ends_with(p, ".svg")) return "image/svg+xml";
  if (ends_with(p, ".png")) return "image/png";
  if (ends_with(p, ".ico")) return "image/x-icon";
  if (ends_with(p, ".md")) return "text/markdown; charset=utf-8";
  if (ends_with(p, ".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

std::optional<StaticFiles::File> StaticFiles::get(std::string_view path) const {
  if (root_.empty()) return std::nullopt;
  const std::string rel = safe_relative(path);
  if (rel.empty()) return std::nullopt;
  std::error_code ec;
  const fs::path full = fs::canonical(fs::path(root_) / rel, ec);
  if (ec || !fs::is_regular_file(full, ec)) return std::nullopt;
  const std::string f = full.string();
  if (f.size() <= root_.size() || f.compare(0, root_.size(), root_) != 0 || f[root_.size()] != '/')
    return std::nullopt;  // a symlink pointing outside the root
  std::ifstream in(full, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream body;
  body << in.rdbuf();
  return File{body.str(), content_type_for(rel)};
}

std::string StaticFiles::find_root(const std::string& hint) {
  if (!hint.empty()) return hint;
  if (const char* env = std::getenv("TERN_WEB_ROOT")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& cand :
         {exe.parent_path() / "web", exe.parent_path().parent_path() / "web"})
      if (is_dir(cand) && fs::exists(cand / "index.html", ec)) return cand.string();
  }
#ifdef TERN_SOURCE_WEB_DIR
  if (is_dir(TERN_SOURCE_WEB_DIR)) return TERN_SOURCE_WEB_DIR;
#endif
  return {};
}

}  // namespace tern::server
