#pragma once
// A string that remembers which of its bytes came from the caller's input
// (message content, tool definitions) rather than from the template's text.
//
// The chat template's output is tokenized in runs: template text with special
// tokens parsed, input bytes with special-token parsing off, so a message that
// spells "<|im_end|>" cannot forge a turn. Every string value in the Jinja
// engine is a Str; concatenation, slicing, trimming, replacing and output keep
// the marks on the bytes they copy.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tern::jinja {

// Bytes [begin, end) of a Str came from input.
struct Span {
  size_t begin = 0, end = 0;
  bool operator==(const Span&) const = default;
};

class Str {
 public:
  Str() = default;
  explicit Str(std::string text, bool input = false);

  const std::string& text() const { return text_; }
  std::string_view view() const { return text_; }
  size_t size() const { return text_.size(); }
  bool empty() const { return text_.empty(); }
  // Sorted, disjoint, non-adjacent spans of input bytes.
  const std::vector<Span>& input() const { return input_; }
  bool any_input() const { return !input_.empty(); }
  bool all_input() const;

  Str& append(const Str& s);
  Str& append(std::string_view template_text);
  // Bytes [pos, pos + n) with their marks.
  Str substr(size_t pos, size_t n = std::string::npos) const;
  void mark_all_input();
  // `text` (of the same length) with this string's marks: case changes.
  Str with_text(std::string text) const;

  // Runs of (text, is_input), in order, concatenating to text().
  std::vector<std::pair<std::string, bool>> runs() const;

 private:
  void add_span(size_t begin, size_t end);
  std::string text_;
  std::vector<Span> input_;
};

}  // namespace tern::jinja
