#include "drafter.h"

#include <algorithm>
#include <cmath>

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

namespace {

// Where `tail` occurs in `text` ending at or after `from` (the end index of
// the first such occurrence, within `to`), or 0.
size_t find_forward(std::span<const int32_t> text, std::span<const int32_t> tail, size_t from,
                    size_t to) {
  const size_t n = tail.size();
  for (size_t end = std::max(from, n); end <= std::min(to, text.size()); ++end)
    if (std::equal(tail.begin(), tail.end(), text.begin() + long(end - n))) return end;
  return 0;
}

}  // namespace

void PredictionDrafter::propose(std::span<const int32_t> output,
                                std::span<const int32_t> prediction, size_t& cursor, int k,
                                std::vector<int32_t>& out) {
  out.clear();
  if (k <= 0 || prediction.empty()) return;
  size_t end = 0;
  if (output.empty()) {
    end = 0;
  } else {
    const size_t size = prediction.size();
    for (size_t n = std::min<size_t>(kMaxNgram, output.size()); n >= 1 && end == 0; --n) {
      const std::span<const int32_t> tail = output.subspan(output.size() - n);
      if (n == 1) {  // one token: only just after where the output was
        end = find_forward(prediction, tail, cursor, cursor + kNearWindow);
        break;
      }
      end = find_forward(prediction, tail, cursor, size);
      if (end == 0) end = find_forward(prediction, tail, 0, std::min(size, cursor + n));
    }
    if (end == 0) return;
  }
  cursor = end;
  const size_t take = std::min(size_t(k), prediction.size() - end);
  out.assign(prediction.begin() + long(end), prediction.begin() + long(end + take));
}

int DraftLength::choose(int k_max, int batch, double cost_ratio) {
  const double p = acceptance(), b = std::max(1, batch), c = std::max(0.0, cost_ratio);
  int best_k = 0;
  double best = 1.0, expected = 0.0, pk = 1.0;
  for (int k = 1; k <= k_max; ++k) {
    pk *= p;
    expected += pk;
    const double gain = (1.0 + expected / b) / (1.0 + c * k);
    if (gain > best) best = gain, best_k = k;
  }
  if (best_k == 0 && k_max > 0 && ++idle_ >= kProbeAfter) best_k = 1;
  if (best_k > 0) idle_ = 0;
  return best_k;
}

void DraftLength::observe(int guessed, int accepted) {
  if (guessed <= 0) return;
  // Positions 1..accepted were kept; the one after them (if any) was not.
  const int seen = accepted + (accepted < guessed ? 1 : 0);
  const double fade = std::pow(kDecay, seen);
  kept_ = kept_ * fade + accepted;
  missed_ = missed_ * fade + (accepted < guessed ? 1 : 0);
  if (kept_ + missed_ < 1e-9) kept_ = 3, missed_ = 1;
}

}  // namespace tern::sched
