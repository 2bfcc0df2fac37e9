// Remote media fetched before a request's preparation, never during it
// (media_prefetch.h, remote_media.h).
#include "media_prefetch.h"

#include <set>

#include "context.h"
#include "tern/server/remote_media.h"

namespace tern::server {
namespace {

thread_local const FetchedMedia* t_fetched = nullptr;

// What the fetches of one request share; a fetch that outlives its request
// (the session ended) still writes here, not into a freed frame.
struct Batch {
  explicit Batch(net::any_io_executor ex) : done(ex, net::steady_timer::time_point::max()) {}
  FetchedMedia fetched;
  size_t pending = 0;
  net::steady_timer done;  // cancelled when the last fetch ends
};

awaitable<void> fetch_one(ServerContext& ctx, std::string client, std::string url,
                          std::shared_ptr<Batch> b) {
  FetchedMedia::Result r = std::vector<uint8_t>();
  try {
    FetchGate::Slot slot = co_await ctx.fetches.acquire(client);
    r = co_await fetch_remote_media(url, ctx.media.policy());
  } catch (const vision::MediaError& e) {
    r = e;
  } catch (const std::exception&) {  // cancelled while waiting for a slot
    r = vision::MediaError(vision::MediaErrorKind::Fetch, kFetchFailedText);
  }
  b->fetched.put(url, std::move(r));
  if (--b->pending == 0) b->done.cancel();
}

// Every URL fetched (or failed) into `into`.
awaitable<void> fetch_all(ServerContext& ctx, const std::string& client,
                          const std::vector<std::string>& urls, FetchedMedia& into) {
  auto ex = co_await net::this_coro::executor;
  auto b = std::make_shared<Batch>(ex);
  const std::set<std::string> unique(urls.begin(), urls.end());
  b->pending = unique.size();
  for (const std::string& url : unique)
    net::co_spawn(ex, fetch_one(ctx, client, url, b), net::detached);
  while (b->pending > 0) {
    co_await b->done.async_wait(use_nothrow);
    auto cs = co_await net::this_coro::cancellation_state;
    if (cs.cancelled() != net::cancellation_type::none)
      throw beast::system_error(net::error::operation_aborted);
  }
  into = std::move(b->fetched);
}

}  // namespace

std::vector<uint8_t> FetchedMedia::bytes(const std::string& url) const {
  const auto it = results_.find(url);
  if (it == results_.end())
    throw vision::MediaError(vision::MediaErrorKind::Fetch, kFetchFailedText);
  if (const auto* e = std::get_if<vision::MediaError>(&it->second)) throw *e;
  return std::get<std::vector<uint8_t>>(it->second);
}

FetchedMediaScope::FetchedMediaScope(const FetchedMedia& f) : previous_(t_fetched) {
  t_fetched = &f;
}
FetchedMediaScope::~FetchedMediaScope() {
  t_fetched = previous_;
}
const FetchedMedia* FetchedMediaScope::current() {
  return t_fetched;
}

std::vector<uint8_t> fetched_media_bytes(const std::string& url, const vision::MediaPolicy&) {
  const FetchedMedia* f = FetchedMediaScope::current();
  if (!f) throw vision::MediaError(vision::MediaErrorKind::Fetch, kFetchFailedText);
  return f->bytes(url);
}

bool FetchGate::has_room(const std::string& client) const {
  const auto it = by_client_.find(client);
  return in_flight_ < total_ && (it == by_client_.end() || it->second < per_client_);
}

void FetchGate::take(const std::string& client) {
  ++in_flight_;
  ++by_client_[client];
}

void FetchGate::release(const std::string& client) {
  --in_flight_;
  if (--by_client_[client] == 0) by_client_.erase(client);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (!has_room((*it)->client)) continue;
    take((*it)->client);
    (*it)->granted = true;
    (*it)->timer.cancel();
    waiters_.erase(it);
    return;
  }
}

awaitable<FetchGate::Slot> FetchGate::acquire(std::string client) {
  // No waiter has room (release hands each freed slot on at once), so one
  // with room overtakes nobody who could go: a client at its limit never
  // holds up the others.
  if (has_room(client)) {
    take(client);
    co_return Slot(this, client);
  }
  // (co_await in a statement of its own: GCC 12 mishandles it inside an initializer.)
  auto ex = co_await net::this_coro::executor;
  auto w = std::make_shared<Waiter>(client, ex);
  waiters_.push_back(w);
  co_await w->timer.async_wait(use_nothrow);
  if (!w->granted) {  // the coroutine was cancelled, not handed a slot
    waiters_.remove(w);
    throw beast::system_error(net::error::operation_aborted);
  }
  co_return Slot(this, client);
}

awaitable<GenerationRequest> prepare_with_remote_media(ServerContext& ctx,
                                                       const std::string& client,
                                                       std::function<GenerationRequest()> parse) {
  FetchedMedia fetched;
  for (int pass = 0;; ++pass) {
    std::vector<std::string> needed;
    try {
      co_return co_await net::co_spawn(
          ctx.prep,
          [&]() -> awaitable<GenerationRequest> {
            FetchedMediaScope scope(fetched);
            co_return parse();
          },
          net::use_awaitable);
    } catch (const NeedsRemoteMedia& n) {
      // Two rounds at most: a Responses continuation finds its stored
      // pictures' sources and its new input's in separate places.
      if (pass > 1) throw std::logic_error("remote media still missing after fetching it");
      needed = n.urls();
    }
    co_await fetch_all(ctx, client, needed, fetched);
  }
}

std::string peer_address(const tcp::socket& s) {
  boost::system::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? std::string() : ep.address().to_string();
}

}  // namespace tern::server
