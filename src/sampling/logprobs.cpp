#include "tern/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tern {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

void LogSoftmax::compute(std::span<const float> logits) {
  float m = kNegInf;
  for (float l : logits) m = l > m ? l : m;  // NaN never wins
  max_ = m;
  if (!(m > kNegInf) || m == std::numeric_limits<float>::infinity()) {
    lse_ = m;  // nothing finite to normalize (or +inf takes all the mass)
    return;
  }
  double sum = 0.0;
  for (float l : logits)
    if (l > kNegInf) sum += double(std::exp(l - m));
  lse_ = m + float(std::log(sum));
}

float LogSoftmax::logprob(float logit) const {
  if (!(logit > kNegInf)) return kNegInf;
  if (!(max_ > kNegInf)) return kNegInf;
  if (max_ == std::numeric_limits<float>::infinity()) return logit == max_ ? 0.0f : kNegInf;
  return std::min(0.0f, logit - lse_);
}

void top_logprobs(std::span<const float> logits, const LogSoftmax& ls, int k,
                  std::vector<std::pair<int32_t, float>>& out, std::vector<int32_t>& heap) {
  out.clear();
  if (k <= 0) return;
  // Heap of the best k, worst on top; ids rise, so a tie never displaces.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[size_t(a)], lb = logits[size_t(b)];
    return la > lb || (la == lb && a < b);
  };
  heap.clear();
  const size_t kk = size_t(k);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (!(l > kNegInf)) continue;
    if (heap.size() < kk) {
      heap.push_back(int32_t(i));
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (l > logits[size_t(heap.front())]) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = int32_t(i);
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), better);  // best first
  for (int32_t t : heap) out.emplace_back(t, ls.logprob(logits[size_t(t)]));
}

}  // namespace tern
