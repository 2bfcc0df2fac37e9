#include "tern/server/metrics_text.h"

#include <charconv>

namespace tern::server {
namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// Shortest text that reads back as the same double ("0.005", "42").
std::string num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void sample(std::string& out, const std::string& name, double v) {
  out += name;
  out += ' ';
  out += num(v);
  out += '\n';
}

void scalar(std::string& out, const char* name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  sample(out, name, v);
}

void histogram(std::string& out, const char* name, const char* help, const sched::Histogram& h) {
  header(out, name, "histogram", help);
  const auto s = h.snapshot();
  const std::string n = name;
  for (size_t i = 0; i < s.upper_bounds.size(); ++i)
    sample(out, n + "_bucket{le=\"" + num(s.upper_bounds[i]) + "\"}", double(s.cumulative[i]));
  sample(out, n + "_bucket{le=\"+Inf\"}", double(s.count));
  sample(out, n + "_sum", s.sum);
  sample(out, n + "_count", double(s.count));
}

}  // namespace

void HttpStats::count_response(int status) {
  std::lock_guard lock(mu_);
  by_status_[status] += 1;
}

std::map<int, uint64_t> HttpStats::responses() const {
  std::lock_guard lock(mu_);
  return by_status_;
}

std::string render_metrics(const sched::Metrics& m, const HttpStats& http) {
  std::string out;
  out.reserve(8192);
  header(out, "tern_requests_total", "counter", "Generation requests by outcome.");
  sample(out, "tern_requests_total{outcome=\"submitted\"}", double(m.requests_submitted.load()));
  sample(out, "tern_requests_total{outcome=\"rejected\"}", double(m.requests_rejected.load()));
  sample(out, "tern_requests_total{outcome=\"finished\"}", double(m.requests_finished.load()));
  sample(out, "tern_requests_total{outcome=\"cancelled\"}", double(m.requests_cancelled.load()));
  sample(out, "tern_requests_total{outcome=\"failed\"}", double(m.requests_failed.load()));
  scalar(out, "tern_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
         double(m.prompt_tokens.load()));
  scalar(out, "tern_generated_tokens_total", "counter", "Tokens generated.",
         double(m.generated_tokens.load()));
  scalar(out, "tern_steps_total", "counter", "Forward passes (token boundaries).",
         double(m.steps.load()));
  scalar(out, "tern_step_tokens_total", "counter", "Tokens over all forward passes.",
         double(m.step_tokens.load()));
  histogram(out, "tern_time_to_first_token_seconds", "Time from submission to the first token.",
            m.time_to_first_token);
  histogram(out, "tern_inter_token_latency_seconds", "Time between consecutive tokens of a stream.",
            m.inter_token_latency);
  histogram(out, "tern_step_duration_seconds", "Duration of one forward pass.", m.step_duration);
  scalar(out, "tern_queue_depth", "gauge", "Requests waiting for admission.",
         double(m.queue_depth.load()));
  scalar(out, "tern_running_sequences", "gauge", "Sequences in the running batch.",
         double(m.running.load()));
  scalar(out, "tern_kv_sequences_used", "gauge", "KV cache sequences in use.",
         double(m.kv_sequences_used.load()));
  scalar(out, "tern_kv_sequences_capacity", "gauge", "KV cache sequences available in total.",
         double(m.kv_sequences_capacity.load()));
  scalar(out, "tern_kv_tokens_used", "gauge", "Tokens held in the KV cache.",
         double(m.kv_tokens_used.load()));
  scalar(out, "tern_kv_tokens_capacity", "gauge", "Tokens the KV cache may hold.",
         double(m.kv_tokens_capacity.load()));
  const double cap = double(m.kv_tokens_capacity.load());
  scalar(out, "tern_kv_usage_ratio", "gauge", "KV tokens used / capacity.",
         cap > 0 ? double(m.kv_tokens_used.load()) / cap : 0.0);
  header(out, "tern_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : http.responses())
    sample(out, "tern_http_responses_total{code=\"" + std::to_string(code) + "\"}", double(n));
  scalar(out, "tern_http_connections_total", "counter", "TCP connections accepted.",
         double(http.connections.load()));
  scalar(out, "tern_websocket_sessions", "gauge", "Open WebSocket sessions.",
         double(http.open_websockets.load()));
  scalar(out, "tern_websocket_messages_total", "counter", "WebSocket messages received.",
         double(http.websocket_messages.load()));
  return out;
}

}  // namespace tern::server
