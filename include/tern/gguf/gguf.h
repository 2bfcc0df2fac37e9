#pragma once
// The gguf module: reading (validated, memory-mapped) and writing GGUF files.
#include "tern/gguf/gguf_file.h"    // IWYU pragma: export
#include "tern/gguf/gguf_writer.h"  // IWYU pragma: export
