#pragma once
// Typed errors thrown by loading, parsing and validation code and caught at
// the boundary (CLI main, server session). Kernels never throw.
#include <stdexcept>
#include <string>

namespace tern {

// Base class: every error a user can cause is one of these, with a message
// that names what was wrong (and, for files, which file).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file (GGUF, image, cache) is malformed, truncated or unsupported.
class FormatError : public Error {
 public:
  using Error::Error;
};

// A caller passed a value out of range or of the wrong kind.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// The OS refused an operation (open, mmap, read, write, disk full).
class IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace tern
