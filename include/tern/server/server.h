#pragma once
// The HTTP/WebSocket front end: one Boost.Asio reactor thread running a C++20
// coroutine per connection (Boost.Beast HTTP/1.1 with keep-alive, and
// WebSocket on the same port), the OpenAI-compatible API, SSE streaming,
// /metrics, and the demo page from web/. Generation runs on the scheduler's
// engine thread; tokens come back through sched::Stream.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tern/model/pooling.h"
#include "tern/server/media_options.h"

namespace tern {
class Engine;
}
namespace tern::sched {
class Scheduler;
struct Metrics;
}  // namespace tern::sched

namespace tern::server {

// How reasoning models' thinking ("<think>...</think>") reaches chat clients.
// Auto: split into reasoning_content when the vocabulary has the think tags
// as tokens; Deepseek: always split; None: the raw text, tags included.
enum class ReasoningFormat : uint8_t { Auto, None, Deepseek };

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  uint16_t port = 8080;            // 0: any free port (see Server::port())
  std::string api_key;             // "" = no authentication
  // Origins allowed to call the API from a browser page (CORS); "*" allows
  // any. Empty (the default): same-origin only, no CORS headers are sent.
  std::vector<std::string> cors_origins;
  std::string model_name;            // id reported by /v1/models and in responses
  std::string web_root;              // "" = find web/ (StaticFiles::find_root)
  size_t body_limit = 1 << 20;       // bytes; larger bodies get 413
  size_t header_limit = 16 << 10;    // bytes; larger headers get 431
  int idle_timeout_s = 60;           // keep-alive idle time and per-read deadline
  int write_timeout_s = 60;          // a client that reads nothing for this long is dropped
                                     // (a WebSocket is closed with 1008)
  size_t ws_outbox_bytes = 1 << 20;  // frames queued per WebSocket before backpressure
  double shutdown_grace_s = 10;      // in-flight generations may finish within this
  int ws_max_generations = 32;       // concurrent generations per WebSocket
  bool strict_fields = false;        // refuse unknown request fields (400) instead of ignoring them
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;
  MediaOptions media;  // images and video in chat messages (media_parts.h)
  // POST /v1/adapters loads files only from below this directory (real
  // paths: `..` and symlinks out are refused); "" (the default): hot loading
  // of adapters is off.
  std::string lora_dir;
  // How POST /v1/embeddings pools a sequence's hidden states (tern serve
  // --pooling, else the file's pooling_type, else mean: resolve_pooling).
  Pooling pooling = Pooling::Mean;
  // A draft model is loaded (tern serve --draft-model): requests may ask
  // for its guesses (speculative.type "draft").
  bool draft_model = false;
};

class Server {
 public:
  Server(Engine& engine, sched::Scheduler& scheduler, sched::Metrics& metrics, ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; throws IoError naming the address when it cannot.
  void listen();
  uint16_t port() const;  // the bound port (after listen())

  // Serves until SIGINT/SIGTERM (or stop()), then shuts down gracefully: stop
  // accepting, let generations finish within the grace period, cancel the
  // rest, close every connection. Returns when all is closed, and request
  // preparation (JSON, templates, tokenizing, media) has ended or was given
  // up on after a short wait (see preparation_abandoned()).
  void run();

  // Preparation work was still running when run() returned: this Server
  // then leaks its state on destruction (the work still uses it), and the
  // caller must end the process without destroying what the work may touch
  // (the engine, the scheduler): std::_Exit after its own shutdown steps.
  bool preparation_abandoned() const;

  // Thread-safe: begins the same graceful shutdown as a signal.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::server
