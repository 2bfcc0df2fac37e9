#pragma once
// State shared by every session of one server. The reactor runs on one
// thread: members marked (reactor) are only touched there; the rest is
// thread-safe or immutable after start.
#include <algorithm>
#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "media_prefetch.h"
#include "tern/core/log.h"
#include "tern/engine/media_side.h"
#include "tern/server/media_parts.h"
#include "tern/server/metrics_text.h"
#include "tern/server/openai_request.h"
#include "tern/server/response_store.h"
#include "tern/server/server.h"
#include "tern/server/static_files.h"

namespace tern::sched {
class Scheduler;
struct Metrics;
}  // namespace tern::sched

namespace tern::server {

// Something that must hear about shutdown (open WebSockets close themselves).
class ShutdownListener {
 public:
  virtual ~ShutdownListener() = default;
  virtual void on_shutdown() = 0;  // (reactor)
};

struct ServerContext {
  ServerContext(Engine& e, sched::Scheduler& s, sched::Metrics& m, ServerOptions o)
      : engine(e),
        scheduler(s),
        metrics(m),
        opts(std::move(o)),
        files(StaticFiles::find_root(opts.web_root)),
        media(opts.media) {
    if (!opts.media.mmproj.empty()) {
      vision = std::make_unique<MediaSide>(opts.media.mmproj, e, &media.cache());
      media.set_vision(vision->has_vision());
      media.set_audio(vision->has_audio());
      if (vision->has_vision()) {
        // Video frames need no more than preprocessing's largest resize target.
        const vision::VisionConfig& c = vision->encoder().config();
        media.set_frame_side(std::max(c.image_size, c.preproc_image_size));
      }
    }
  }

  Engine& engine;
  sched::Scheduler& scheduler;
  sched::Metrics& metrics;
  const ServerOptions opts;
  const StaticFiles files;
  MediaService media;  // media policy, embedding cache, media metrics (thread-safe)
  // Remote media fetches in flight, in all and per client address (reactor).
  FetchGate fetches{opts.media.max_fetches, opts.media.max_fetches_per_client};
  // The vision projector and/or audio encoder (--mmproj), their rows cached
  // in media.cache(); null on a text-only server. Immutable after start; its source runs on the
  // engine thread.
  std::unique_ptr<MediaSide> vision;
  std::string model_id;  // what /v1/models lists
  // Chat output is split into reasoning and answer (--reasoning-format);
  // think_open is the "<think>" token when the vocabulary has one (-1 if not).
  bool split_reasoning = false;
  int32_t think_open = -1;
  int64_t created = 0;  // unix time the server started
  HttpStats http;
  ResponseStore responses;  // recent /v1/responses, for previous_response_id
  std::shared_ptr<spdlog::logger> log = tern::log::get("server");

  // CPU work a request needs before it can run (JSON, chat template,
  // tokenization, media decode) runs here, never on the reactor thread, so a
  // 100 kB prompt cannot stall every other connection; a few threads, so one
  // large decode does not hold every other request's preparation behind it.
  // Nothing here waits on the network: remote media is fetched on the
  // reactor before (media_prefetch.h). Each session awaits its own, so a
  // session's messages keep their order.
  boost::asio::thread_pool prep{4};

  bool stopping = false;                   // (reactor) shutdown has begun
  std::set<ShutdownListener*> listeners;   // (reactor)
  int busy_exchanges = 0;                  // (reactor) HTTP requests being answered
  std::function<void()> on_exchange_done;  // (reactor) shutdown waits on this

  UnknownFields unknown_fields() const {
    return opts.strict_fields ? UnknownFields::Refuse : UnknownFields::Ignore;
  }

  // "req-<n>": names a request in every log line and in response ids.
  std::string next_request_id() {
    return "req-" + std::to_string(next_id_.fetch_add(1, std::memory_order_relaxed));
  }
  // "conn-<n>": names a connection, the unit the scheduler is fair between.
  std::string next_connection_id() {
    return "conn-" + std::to_string(next_conn_.fetch_add(1, std::memory_order_relaxed));
  }

 private:
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> next_conn_{1};
};

}  // namespace tern::server
