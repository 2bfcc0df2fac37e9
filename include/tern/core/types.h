#pragma once
#include <cstdint>

namespace tern {

// A live sequence in the KV cache (one generation's context).
using SeqId = int32_t;

}  // namespace tern
