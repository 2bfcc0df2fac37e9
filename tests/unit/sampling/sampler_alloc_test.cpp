// sample() must not allocate: global operator new is replaced in this test
// binary by one that counts calls, and the count must not move across many
// sample() calls with every stage of the chain on.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "sampling_test_util.h"
#include "tern/sampling/sampler.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace tern {
namespace {

TEST(SamplerAllocations, SampleNeverAllocates) {
  const int32_t n = 49152;
  for (int top_k : {0, 40, 20000}) {  // no top-k, top-k by heap, top-k by selection
    SamplingParams p;
    p.seed = 5;
    p.top_k = top_k;
    p.top_p = 0.9f;
    p.min_p = top_k == 40 ? 0.05f : 0.0f;  // without min-p, top-p sorts a large nucleus
    p.repeat_penalty = 1.1f;
    p.frequency_penalty = 0.2f;
    p.presence_penalty = 0.1f;
    const long at_start = g_allocations.load();
    Sampler s(p, n);
    ASSERT_GT(g_allocations.load(), at_start);  // the counter sees the scratch buffers
    std::vector<float> logits(static_cast<size_t>(n));
    const long before = g_allocations.load();
    for (int step = 0; step < 20; ++step) {
      for (int32_t i = 0; i < n; ++i) logits[size_t(i)] = float((i * 7919 + step) % 1000) * 0.001f;
      const int32_t t = s.sample(logits);
      s.accept(t, true);
    }
    EXPECT_EQ(g_allocations.load(), before) << "top_k=" << top_k;
  }
}

}  // namespace
}  // namespace tern
