#pragma once
// Finds stop strings in streamed text without ever showing part of one.
//
// Text arrives in pieces (one per token). Any tail that could still grow into a
// stop string is held back, as is an incomplete UTF-8 sequence at the end, so
// what push() emits is always safe to show. The first stop string to complete
// ends the stream; if several complete in the same push, the one starting
// earliest wins. Nothing at or after the stop string is ever emitted.
#include <string>
#include <string_view>
#include <vector>

namespace tern {

class StopMatcher {
 public:
  // Throws InvalidArgument if a stop string is empty. No stops: text passes
  // straight through (except a trailing incomplete UTF-8 sequence).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string emit;      // text that is safe to show now
    bool stopped = false;  // a stop string completed; emit is the text before it
  };

  // Appends `text`. Once stopped, every push returns {"", true}.
  Result push(std::string_view text);

  // At the end of generation: returns the held-back text ("" once stopped).
  std::string flush();

  bool stopped() const { return stopped_; }
  // Index (into the constructor's list) of the stop string that matched, or -1.
  int matched() const { return matched_; }

 private:
  // Longest suffix of pending_ that is a proper prefix of some stop string.
  size_t held_for_stops() const;

  std::vector<std::string> stops_;
  std::string pending_;  // held back: may be the start of a stop string
  bool stopped_ = false;
  int matched_ = -1;
};

}  // namespace tern
