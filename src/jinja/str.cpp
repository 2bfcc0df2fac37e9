// Str: text with input marks (see str.h).
#include "tern/jinja/str.h"

#include <algorithm>

namespace tern::jinja {

Str::Str(std::string text, bool input) : text_(std::move(text)) {
  if (input) mark_all_input();
}

bool Str::all_input() const {
  return text_.empty() || (input_.size() == 1 && input_[0] == Span{0, text_.size()});
}

void Str::add_span(size_t begin, size_t end) {
  if (begin >= end) return;
  if (!input_.empty() && input_.back().end == begin) {
    input_.back().end = end;
  } else {
    input_.push_back({begin, end});
  }
}

Str& Str::append(const Str& s) {
  const size_t base = text_.size();
  text_ += s.text_;
  for (const Span& sp : s.input_) add_span(base + sp.begin, base + sp.end);
  return *this;
}

Str& Str::append(std::string_view template_text) {
  text_ += template_text;
  return *this;
}

Str Str::substr(size_t pos, size_t n) const {
  Str out;
  if (pos >= text_.size()) return out;
  const size_t end = n == std::string::npos ? text_.size() : std::min(text_.size(), pos + n);
  out.text_ = text_.substr(pos, end - pos);
  for (const Span& sp : input_) {
    const size_t b = std::max(sp.begin, pos);
    const size_t e = std::min(sp.end, end);
    if (b < e) out.add_span(b - pos, e - pos);
  }
  return out;
}

Str Str::with_text(std::string text) const {
  Str out = *this;
  if (text.size() == text_.size()) {
    out.text_ = std::move(text);
  } else {
    out = Str(std::move(text), any_input());
  }
  return out;
}

void Str::mark_all_input() {
  input_.clear();
  add_span(0, text_.size());
}

std::vector<std::pair<std::string, bool>> Str::runs() const {
  std::vector<std::pair<std::string, bool>> out;
  size_t at = 0;
  for (const Span& sp : input_) {
    if (sp.begin > at) out.emplace_back(text_.substr(at, sp.begin - at), false);
    out.emplace_back(text_.substr(sp.begin, sp.end - sp.begin), true);
    at = sp.end;
  }
  if (at < text_.size()) out.emplace_back(text_.substr(at), false);
  return out;
}

}  // namespace tern::jinja
