#include "tern/core/json_scan.h"

namespace tern {

size_t json_container_end(std::string_view s, size_t from) {
  while (from < s.size() &&
         (s[from] == ' ' || s[from] == '\t' || s[from] == '\n' || s[from] == '\r'))
    ++from;
  if (from >= s.size() || (s[from] != '[' && s[from] != '{')) return std::string_view::npos;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace tern
