#include "tern/sampling/stop_matcher.h"

#include <algorithm>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

bool is_continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Bytes a UTF-8 sequence with this lead byte has in all (0: not a lead byte).
size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

// Length of a trailing UTF-8 sequence that still misses bytes (0 if none, or
// if the tail is not valid UTF-8: invalid bytes are never held forever).
size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if (is_continuation(c)) continue;
    const size_t len = sequence_length(c);
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) {
      throw InvalidArgument("sampling: stop strings must be non-empty (index " + std::to_string(i) +
                            ")");
    }
  }
}

size_t StopMatcher::held_for_stops() const {
  const std::string_view buf = pending_;
  size_t held = 0;
  for (const std::string& stop : stops_) {
    // The first start position that works gives the longest proper prefix.
    const size_t longest = std::min(stop.size() - 1, buf.size());
    for (size_t start = buf.size() - longest; start < buf.size(); ++start) {
      const std::string_view tail = buf.substr(start);
      if (tail.size() <= held) break;  // cannot beat what is already held
      if (std::string_view(stop).starts_with(tail)) {
        held = tail.size();
        break;
      }
    }
  }
  return held;
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  if (stopped_) return {"", true};
  pending_.append(text);

  // Everything before pending_ was checked already, and pending_ keeps any tail
  // that could start a stop string, so a match can only begin inside pending_.
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos < best) {
      best = pos;
      matched_ = int(i);
    }
  }
  if (best != std::string::npos) {
    Result r{pending_.substr(0, best), true};
    pending_.clear();
    stopped_ = true;
    return r;
  }

  const size_t held = std::max(held_for_stops(), incomplete_utf8_tail(pending_));
  size_t split = pending_.size() - held;
  // Never cut a character in two (only possible with a stop string that is
  // not valid UTF-8 itself): hold back to the start of the character.
  for (int step = 0; step < 3 && split > 0 && split < pending_.size() &&
                     is_continuation(static_cast<unsigned char>(pending_[split]));
       ++step) {
    --split;
  }
  Result r{pending_.substr(0, split), false};
  pending_.erase(0, split);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tern
