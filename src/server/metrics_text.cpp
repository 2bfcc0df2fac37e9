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

// The one memory budget (core/memory_budget.h): bytes per pool, now and at
// their peak, and admission by bytes.
void budget_metrics(std::string& out, const sched::Metrics& m) {
  const MemoryBudgetStats s = m.budget->stats();
  scalar(out, "tern_mem_budget_bytes", "gauge",
         "The memory budget KV blocks and image embeddings share (--mem-budget-mb).",
         double(s.total));
  header(out, "tern_mem_used_bytes", "gauge", "Bytes charged to the memory budget, by pool.");
  header(out, "tern_mem_peak_bytes", "gauge",
         "Highest bytes charged to the memory budget since start, by pool (all: their sum).");
  size_t all = 0;
  for (int p = 0; p < kMemPools; ++p) {
    const std::string pool = mem_pool_name(MemPool(p));
    sample(out, "tern_mem_used_bytes{pool=\"" + pool + "\"}", double(s.used[p]));
    sample(out, "tern_mem_peak_bytes{pool=\"" + pool + "\"}", double(s.peak[p]));
    all += s.used[p];
  }
  sample(out, "tern_mem_peak_bytes{pool=\"all\"}", double(s.peak_all));
  scalar(out, "tern_mem_free_bytes", "gauge", "Bytes of the memory budget not charged.",
         double(s.total > all ? s.total - all : 0));
  header(out, "tern_mem_reclaimed_bytes_total", "counter",
         "Bytes a pool gave back because another needed room.");
  for (int p = 0; p < kMemPools; ++p)
    sample(
        out,
        "tern_mem_reclaimed_bytes_total{pool=\"" + std::string(mem_pool_name(MemPool(p))) + "\"}",
        double(s.reclaimed[p]));
  scalar(out, "tern_mem_admission_waits_total", "counter",
         "Times admission stopped because a request's image rows did not fit the budget yet.",
         double(m.mem_waits.load()));
  scalar(out, "tern_mem_refused_total", "counter",
         "Requests refused (503 insufficient_memory): bigger than the whole budget.",
         double(m.mem_refused.load()));
}

// The KV memory hierarchy: blocks per tier, prefix-cache hits per tier,
// flash traffic.
void kv_metrics(std::string& out, const kv::KvStats& k) {
  scalar(out, "tern_kv_block_tokens", "gauge", "Tokens per KV block.", double(k.block_tokens));
  scalar(out, "tern_kv_bytes_per_token", "gauge", "KV bytes per token, all layers.",
         double(k.bytes_per_token));
  header(out, "tern_kv_blocks", "gauge", "KV blocks by tier and state.");
  sample(out, "tern_kv_blocks{tier=\"dram\",state=\"capacity\"}", double(k.dram_blocks));
  sample(out, "tern_kv_blocks{tier=\"dram\",state=\"free\"}", double(k.dram_free));
  sample(out, "tern_kv_blocks{tier=\"dram\",state=\"used\"}", double(k.dram_used));
  sample(out, "tern_kv_blocks{tier=\"dram\",state=\"cached\"}", double(k.dram_cached));
  sample(out, "tern_kv_blocks{tier=\"dram\",state=\"pinned\"}", double(k.dram_pinned));
  sample(out, "tern_kv_blocks{tier=\"flash\",state=\"capacity\"}", double(k.flash_blocks));
  sample(out, "tern_kv_blocks{tier=\"flash\",state=\"used\"}", double(k.flash_used));
  sample(out, "tern_kv_blocks{tier=\"flash\",state=\"live\"}", double(k.flash_live));
  sample(out, "tern_kv_blocks{tier=\"flash\",state=\"cached\"}", double(k.flash_cached));
  scalar(out, "tern_kv_prefix_lookups_total", "counter",
         "Prefix-cache lookups (one per admitted prompt).", double(k.lookups));
  header(out, "tern_kv_prefix_hits_total", "counter", "Prefix-cache blocks reused, by tier.");
  sample(out, "tern_kv_prefix_hits_total{tier=\"dram\"}", double(k.hits_dram));
  sample(out, "tern_kv_prefix_hits_total{tier=\"flash\"}", double(k.hits_flash));
  scalar(out, "tern_kv_prefix_misses_total", "counter",
         "Prompt blocks a prefix-cache lookup wanted but did not find.", double(k.misses));
  header(out, "tern_kv_prefix_tokens_total", "counter",
         "Prompt tokens by where their KV came from.");
  sample(out, "tern_kv_prefix_tokens_total{source=\"dram\"}", double(k.tokens_reused_dram));
  sample(out, "tern_kv_prefix_tokens_total{source=\"flash\"}", double(k.tokens_reused_flash));
  sample(out, "tern_kv_prefix_tokens_total{source=\"computed\"}", double(k.tokens_computed));
  header(out, "tern_kv_flash_blocks_total", "counter", "Blocks moved to flash.");
  sample(out, "tern_kv_flash_blocks_total{kind=\"spilled\"}", double(k.blocks_spilled));
  sample(out, "tern_kv_flash_blocks_total{kind=\"evicted\"}", double(k.blocks_evicted_to_flash));
  sample(out, "tern_kv_flash_blocks_total{kind=\"dropped\"}", double(k.blocks_dropped));
  scalar(out, "tern_kv_pinned_evicted_total", "counter",
         "Session-pinned KV blocks evicted from DRAM before their pin expired.",
         double(k.pinned_evicted));
  header(out, "tern_kv_flash_bytes_total", "counter", "Bytes written to and read from flash.");
  sample(out, "tern_kv_flash_bytes_total{op=\"spilled\"}", double(k.bytes_spilled));
  sample(out, "tern_kv_flash_bytes_total{op=\"prefetched\"}", double(k.bytes_prefetched));
  sample(out, "tern_kv_flash_bytes_total{op=\"reloaded\"}", double(k.bytes_reloaded));
  scalar(out, "tern_kv_prefetch_stalls_total", "counter",
         "Attention waits that found flash reads still in flight.", double(k.prefetch_stalls));
  scalar(out, "tern_kv_prefetch_stall_seconds_total", "counter", "Time spent in those waits.",
         k.prefetch_stall_ms / 1000.0);
  header(out, "tern_kv_flash_errors_total", "counter", "Failed flash operations.");
  sample(out, "tern_kv_flash_errors_total{op=\"write\"}", double(k.write_errors));
  sample(out, "tern_kv_flash_errors_total{op=\"read\"}", double(k.read_errors));
}

// The gauges Kubernetes' Gateway API Inference Extension (the endpoint picker)
// and other LLM-aware routers read, under vLLM's names with tern's prefix
// (vllm:num_requests_running and so on; deploy/README.md maps them). Derived
// from the gauges above: waiting counts preempted sequences too, as vLLM's
// does, and KV usage is the fraction of DRAM blocks a live sequence holds
// (unreferenced prefix-cache blocks are evictable, so they count as free).
void router_metrics(std::string& out, const sched::Metrics& m, const kv::KvStats& k) {
  scalar(out, "tern:num_requests_running", "gauge",
         "Requests in the running batch (vllm:num_requests_running).", double(m.running.load()));
  scalar(out, "tern:num_requests_waiting", "gauge",
         "Requests waiting for admission, preempted ones included (vllm:num_requests_waiting).",
         double(m.queue_depth.load() + m.preempted.load()));
  scalar(out, "tern:kv_cache_usage_perc", "gauge",
         "Fraction (0..1) of KV DRAM blocks held by live sequences (vllm:kv_cache_usage_perc).",
         k.dram_blocks > 0 ? double(k.dram_used) / double(k.dram_blocks) : 0.0);
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
  scalar(out, "tern_preempted_sequences", "gauge",
         "Sequences preempted for KV room, waiting to resume.", double(m.preempted.load()));
  scalar(out, "tern_draft_tokens_total", "counter",
         "Speculative decoding: tokens guessed by prompt lookup and checked.",
         double(m.draft_tokens.load()));
  scalar(out, "tern_draft_accepted_tokens_total", "counter",
         "Speculative decoding: guessed tokens the model agreed with.",
         double(m.draft_accepted_tokens.load()));
  scalar(out, "tern_preemptions_total", "counter", "Sequences preempted to make KV room.",
         double(m.preemptions.load()));
  scalar(out, "tern_step_yields_total", "counter",
         "Steps paused between layers so that newly arrived short prompts run first.",
         double(m.step_yields.load()));
  scalar(out, "tern_yield_prompts_total", "counter",
         "Short prompts that got their first token in another step's pause.",
         double(m.yield_prompts.load()));
  scalar(out, "tern_kv_io_failures_total", "counter", "Requests whose KV a flash-tier error broke.",
         double(m.kv_io_failures.load()));
  scalar(out, "tern_vision_encodes_total", "counter",
         "Image encodes started (sliced between steps).", double(m.vision_encodes.load()));
  scalar(out, "tern_vision_encode_slices_total", "counter", "Time slices image encodes ran in.",
         double(m.vision_encode_slices.load()));
  scalar(out, "tern_vision_encodes_shared_total", "counter",
         "Prompts that waited on an encode already under way for the same picture.",
         double(m.vision_encodes_shared.load()));
  scalar(out, "tern_vision_encodes_dropped_total", "counter",
         "Image encodes dropped because every request waiting for them went away.",
         double(m.vision_encodes_dropped.load()));
  const kv::KvStats kv = m.kv();
  kv_metrics(out, kv);
  if (m.budget) budget_metrics(out, m);
  router_metrics(out, m, kv);
  header(out, "tern_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : http.responses())
    sample(out, "tern_http_responses_total{code=\"" + std::to_string(code) + "\"}", double(n));
  scalar(out, "tern_http_connections_total", "counter", "TCP connections accepted.",
         double(http.connections.load()));
  scalar(out, "tern_websocket_sessions", "gauge", "Open WebSocket sessions.",
         double(http.open_websockets.load()));
  scalar(out, "tern_websocket_messages_total", "counter", "WebSocket messages received.",
         double(http.websocket_messages.load()));
  scalar(out, "tern_websocket_stalled_total", "counter",
         "WebSockets closed (1008) because the client stopped reading its frames.",
         double(http.websocket_stalled.load()));
  return out;
}

}  // namespace tern::server
