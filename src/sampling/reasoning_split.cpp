#include "tern/sampling/reasoning_split.h"

#include <algorithm>
#include <utility>

namespace tern {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t leading_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

std::string_view rstrip(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool start_in_reasoning, std::string open, std::string close)
    : open_(std::move(open)),
      close_(std::move(close)),
      state_(start_in_reasoning ? State::Reasoning : State::Start),
      skip_ws_(start_in_reasoning) {}

ReasoningSplitter::Parts ReasoningSplitter::push(std::string_view text) {
  pending_ += text;
  Parts out;
  run(out, false);
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::flush() {
  Parts out;
  run(out, true);
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::split(std::string_view text, bool start_in_reasoning) {
  ReasoningSplitter s(start_in_reasoning);
  Parts a = s.push(text);
  Parts b = s.flush();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

void ReasoningSplitter::run(Parts& out, bool at_end) {
  for (;;) {
    if (state_ == State::Start) {
      std::string_view rest = std::string_view(pending_).substr(leading_space(pending_));
      if (rest.starts_with(open_)) {
        pending_.erase(0, pending_.size() - rest.size() + open_.size());
        state_ = State::Reasoning;
        skip_ws_ = true;
        continue;
      }
      if (!at_end && std::string_view(open_).starts_with(rest)) return;  // may still open
      state_ = State::Content;  // no reasoning: the output is all answer, as written
      continue;
    }
    if (skip_ws_) {
      pending_.erase(0, leading_space(pending_));
      if (pending_.empty()) return;
      skip_ws_ = false;
    }
    if (state_ == State::Content) {
      out.content += pending_;
      pending_.clear();
      return;
    }
    // Reasoning.
    if (size_t p = pending_.find(close_); p != std::string::npos) {
      out.reasoning += rstrip(std::string_view(pending_).substr(0, p));
      pending_.erase(0, p + close_.size());
      state_ = State::Content;
      skip_ws_ = true;
      continue;
    }
    if (at_end) {
      out.reasoning += rstrip(pending_);
      pending_.clear();
      return;
    }
    // Hold back a partial close tag and the whitespace before it.
    std::string_view body = std::string_view(pending_);
    body.remove_suffix(partial_tag(body, close_));
    body = rstrip(body);
    out.reasoning += body;
    pending_.erase(0, body.size());
    return;
  }
}

}  // namespace tern
