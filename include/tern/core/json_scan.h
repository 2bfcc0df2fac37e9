#pragma once
// Finding where a JSON array or object ends in streamed text, without
// parsing it: for the tool-call parser (a call ends where its JSON does) and
// the chat template's probe renders.
#include <cstddef>
#include <string_view>

namespace tern {

// One past the bracket that closes the array or object starting at
// text[from] (after spaces); npos while it is unfinished, or when text[from]
// does not start one. Strings and their escapes are skipped; the value is not
// validated.
size_t json_container_end(std::string_view text, size_t from = 0);

}  // namespace tern
