#pragma once
// Unguessable identifiers: `bytes` random bytes from the operating system's
// generator (getrandom), written as lowercase hex. For ids that grant access
// to something (a stored response), where a counter would let anyone
// enumerate them.
#include <cstddef>
#include <string>

namespace tern {

std::string random_hex(size_t bytes = 16);  // 16 bytes: 128 bits, 32 hex digits

}  // namespace tern
