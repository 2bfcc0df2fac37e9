#include "drafter.h"

#include <algorithm>

namespace tern::sched {

void NgramDrafter::propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) {
  out.clear();
  const int n_tok = int(tokens.size());
  if (k <= 0) return;
  const int lowest = std::max(0, n_tok - kMaxLookback);
  for (int n = std::min(kMaxNgram, n_tok - 1); n >= kMinNgram; --n) {
    const std::span<const int32_t> tail = tokens.subspan(size_t(n_tok - n));
    // An earlier occurrence ending at `end` (exclusive), with at least one
    // token after it; the most recent one is the best guess.
    for (int end = n_tok - 1; end - n >= lowest; --end) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + (end - n))) continue;
      const int take = std::min(k, n_tok - end);
      out.assign(tokens.begin() + end, tokens.begin() + end + take);
      return;
    }
  }
}

}  // namespace tern::sched
