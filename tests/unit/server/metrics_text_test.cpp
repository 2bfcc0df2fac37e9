#include "tern/server/metrics_text.h"

#include <gtest/gtest.h>

namespace tern::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(MetricsText, PrometheusExposition) {
  sched::Metrics m;
  m.requests_finished = 3;
  m.generated_tokens = 42;
  m.queue_depth = 2;
  m.kv_tokens_used = 50;
  m.kv_tokens_capacity = 200;
  m.running = 4;
  m.preempted = 1;
  kv::KvStats kv;
  kv.dram_blocks = 16;
  kv.dram_used = 6;
  kv.dram_cached = 5;
  m.set_kv(kv);
  m.time_to_first_token.observe(0.004);
  m.time_to_first_token.observe(0.2);
  m.time_to_first_token.observe(100);
  HttpStats http;
  http.count_response(200);
  http.count_response(200);
  http.count_response(429);
  const std::string t = render_metrics(m, http);
  EXPECT_TRUE(has_line(t, "# TYPE tern_requests_total counter"));
  EXPECT_TRUE(has_line(t, "tern_requests_total{outcome=\"finished\"} 3"));
  EXPECT_TRUE(has_line(t, "tern_generated_tokens_total 42"));
  EXPECT_TRUE(has_line(t, "tern_queue_depth 2"));
  EXPECT_TRUE(has_line(t, "tern_kv_usage_ratio 0.25"));
  // The names LLM-aware routers scrape (vLLM's, with tern's prefix).
  EXPECT_TRUE(has_line(t, "# TYPE tern:num_requests_running gauge"));
  EXPECT_TRUE(has_line(t, "tern:num_requests_running 4"));
  EXPECT_TRUE(has_line(t, "tern:num_requests_waiting 3"));
  EXPECT_TRUE(has_line(t, "tern:kv_cache_usage_perc 0.375"));
  EXPECT_TRUE(has_line(t, "# TYPE tern_time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has_line(t, "tern_time_to_first_token_seconds_bucket{le=\"0.005\"} 1"));
  EXPECT_TRUE(has_line(t, "tern_time_to_first_token_seconds_bucket{le=\"0.25\"} 2"));
  EXPECT_TRUE(has_line(t, "tern_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3"));
  EXPECT_TRUE(has_line(t, "tern_time_to_first_token_seconds_count 3"));
  EXPECT_TRUE(has_line(t, "tern_http_responses_total{code=\"200\"} 2"));
  EXPECT_TRUE(has_line(t, "tern_http_responses_total{code=\"429\"} 1"));
  // Every non-comment line is "name[{labels}] value".
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t nl = t.find('\n', pos);
    ASSERT_NE(nl, std::string::npos) << "text must end with a newline";
    const std::string line = t.substr(pos, nl - pos);
    if (line[0] != '#') {
      const size_t sp = line.rfind(' ');
      ASSERT_NE(sp, std::string::npos) << line;
      EXPECT_NO_THROW(std::stod(line.substr(sp + 1))) << line;
    }
    pos = nl + 1;
  }
}

TEST(Histogram, CumulativeBuckets) {
  sched::Histogram h({1.0, 2.0, 3.0});
  for (double v : {0.5, 1.0, 1.5, 2.5, 9.0}) h.observe(v);
  const auto s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum, 14.5);
}

}  // namespace
}  // namespace tern::server
