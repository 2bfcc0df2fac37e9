#pragma once
// Serves the demo page (web/: plain HTML/JS/CSS, no build step) from disk,
// read-only, with no way out of its root directory.
#include <optional>
#include <string>
#include <string_view>

namespace tern::server {

class StaticFiles {
 public:
  // root: the directory to serve; "" disables static files.
  explicit StaticFiles(std::string root);

  struct File {
    std::string body;
    std::string content_type;
  };

  // `path` is the request target's path (no query). "/" is index.html. Returns
  // nothing for a missing file, a directory, or any path that tries to leave
  // the root ("..", symlinks pointing outside, backslashes, NUL).
  std::optional<File> get(std::string_view path) const;

  const std::string& root() const { return root_; }

  // Where web/ is: `hint` if given, else $TERN_WEB_ROOT, else web/ next to or
  // one level above the executable, else the source tree's web/. "" if none.
  static std::string find_root(const std::string& hint);

  static std::string content_type_for(std::string_view path);

 private:
  std::string root_;  // canonical
};

}  // namespace tern::server
