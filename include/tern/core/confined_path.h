#pragma once
// Paths a client names, confined to one directory the operator chose
// (--media-dir, --lora-dir). A path is resolved twice: lexically first (so
// `..` and foreign absolute paths are refused without touching the file
// system, revealing nothing about what exists elsewhere), then with symlinks
// resolved (a link inside that points outside is refused).
#include <string>

#include "tern/core/error.h"

namespace tern {

enum class PathRefusal {
  Empty,          // "" was given
  Nul,            // a NUL byte inside (C APIs would cut the path there)
  NoRoot,         // the directory itself is not available
  Outside,        // resolves outside the directory (`..`, another absolute path)
  OutsideByLink,  // a symlink below the directory points outside it
  NotFound,       // nothing there (or a dangling link)
  NotRegular,     // a directory, FIFO, device or socket
};

// The message names the refusal and the path as the client gave it (never
// the directory's real location or anything read from a file).
class ConfinedPathError : public InvalidArgument {
 public:
  ConfinedPathError(PathRefusal why, const std::string& message)
      : InvalidArgument(message), why_(why) {}
  PathRefusal why() const { return why_; }

 private:
  PathRefusal why_;
};

// `path` (relative to `root`, or absolute) as a canonical path to a regular
// file at or below root's canonical path. Throws ConfinedPathError. Opening
// the result is still the caller's job: open it with O_NOFOLLOW | O_NONBLOCK
// and check fstat, since the file may change between the two.
std::string resolve_confined_path(const std::string& root, const std::string& path);

}  // namespace tern
