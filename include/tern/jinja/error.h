#pragma once
// The one error the Jinja engine throws: a template it cannot parse or run
// (unsupported construct, type error, raise_exception(), a limit reached).
// The message names the construct and the template line.
#include <string>

#include "tern/core/error.h"

namespace tern::jinja {

class Error : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

}  // namespace tern::jinja
