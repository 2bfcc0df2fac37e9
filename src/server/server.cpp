// The reactor: io_context on one thread, the accept loop, signals, and the
// two-phase graceful shutdown.
//
// Shutdown (SIGINT/SIGTERM or stop()):
//   1. stop accepting submissions: requests that still arrive (the listening
//      socket stays open during the drain) get 503, /health answers 503, and
//      open WebSockets are told to close once their generations end;
//   2. wait until the scheduler is idle or the grace period is over, then
//      cancel whatever still runs and wait for it to unwind;
//   3. wait (briefly) for HTTP responses being written to finish, then stop
//      listening and send terminal cancellation to every session; stop the io_context when they
//      are gone or after a last deadline;
//   4. wait (briefly) for request preparation running on the prep pool; work
//      stuck past that is abandoned (preparation_abandoned()), so a request
//      that takes long to prepare never keeps the process from exiting.
#include "tern/server/server.h"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <filesystem>
#include <future>
#include <list>
#include <thread>

#include "context.h"
#include "generation.h"
#include "session.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {

// How long shutdown waits for request preparation that is still running.
constexpr std::chrono::milliseconds kPrepDrain{2000};

struct Server::Impl {
  Impl(Engine& e, sched::Scheduler& s, sched::Metrics& m, ServerOptions o)
      : ctx(e, s, m, std::move(o)), acceptor(ioc), signals(ioc, SIGINT, SIGTERM), wait_timer(ioc) {}
  ~Impl() {
    sched_idle_off();
    ctx.on_exchange_done = {};  // wait_timer goes before the frames ~io_context destroys
  }
  void sched_idle_off() { ctx.scheduler.set_idle_callback({}); }

  awaitable<void> accept_loop();
  awaitable<void> shutdown();
  awaitable<void> wait_until(const std::function<bool()>& done,
                             std::chrono::steady_clock::time_point deadline);
  void spawn_session(tcp::socket socket);
  void begin_shutdown();
  bool drain_prep(std::chrono::milliseconds limit);

  // Declared before ioc so they outlive it: destroying the io_context
  // destroys any session frames still pending, which refer to both.
  ServerContext ctx;
  std::list<net::cancellation_signal> sessions;  // one per live session
  net::io_context ioc{1};
  tcp::acceptor acceptor;
  net::signal_set signals;
  net::steady_timer wait_timer;  // shutdown waits on it; events cancel it
  bool shutdown_started = false;
  bool prep_abandoned = false;
};

void Server::Impl::spawn_session(tcp::socket socket) {
  auto it = sessions.emplace(sessions.end());
  auto ex = socket.get_executor();
  net::co_spawn(ex, run_http_session(ctx, std::move(socket)),
                net::bind_cancellation_slot(it->slot(), [this, it](std::exception_ptr e) {
                  if (e) {
                    try {
                      std::rethrow_exception(e);
                    } catch (const boost::system::system_error& ex) {
                      // Shutdown's terminal cancellation surfaces at the
                      // session's next co_await: that is how it is meant to end.
                      if (ex.code() == net::error::operation_aborted && shutdown_started)
                        ctx.log->debug("session cancelled by shutdown");
                      else
                        ctx.log->error("session ended by an exception: {}", ex.what());
                    } catch (const std::exception& ex) {
                      ctx.log->error("session ended by an exception: {}", ex.what());
                    }
                  }
                  sessions.erase(it);
                  if (shutdown_started) wait_timer.cancel();
                }));
}

awaitable<void> Server::Impl::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(net::make_strand(ioc), use_nothrow);
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      ctx.log->warn("accept failed: {}", ec.message());
      if (ec == net::error::no_descriptors) {
        // Out of file descriptors: back off instead of spinning.
        net::steady_timer t(ioc, std::chrono::milliseconds(100));
        co_await t.async_wait(use_nothrow);
      }
      continue;
    }
    beast::error_code nec;
    socket.set_option(tcp::no_delay(true), nec);
    spawn_session(std::move(socket));
  }
}

// Waits until done() or the deadline; anything that may change done() cancels wait_timer.
awaitable<void> Server::Impl::wait_until(const std::function<bool()>& done,
                                         std::chrono::steady_clock::time_point deadline) {
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    wait_timer.expires_at(deadline);
    co_await wait_timer.async_wait(use_nothrow);
  }
}

void Server::Impl::begin_shutdown() {
  if (shutdown_started) return;
  shutdown_started = true;
  net::co_spawn(ioc, shutdown(), net::detached);
}

awaitable<void> Server::Impl::shutdown() {
  using namespace std::chrono;
  auto& sched = ctx.scheduler;
  ctx.stopping = true;
  sched.stop_accepting();
  sched.set_idle_callback([this] { net::post(ioc, [this] { wait_timer.cancel(); }); });
  ctx.on_exchange_done = [this] { wait_timer.cancel(); };
  for (ShutdownListener* l : std::set<ShutdownListener*>(ctx.listeners)) l->on_shutdown();
  ctx.log->info("shutting down: letting running generations finish (grace {:.1f} s)",
                ctx.opts.shutdown_grace_s);

  const auto grace = steady_clock::now() + duration_cast<steady_clock::duration>(
                                               duration<double>(ctx.opts.shutdown_grace_s));
  co_await wait_until([&] { return sched.idle(); }, grace);
  if (!sched.idle()) {
    ctx.log->warn("grace period over: cancelling the generations still running");
    sched.cancel_all();
    co_await wait_until([&] { return sched.idle(); }, steady_clock::now() + seconds(5));
  }
  // Let responses that are being written reach their clients.
  co_await wait_until([&] { return ctx.busy_exchanges == 0 && ctx.listeners.empty(); },
                      steady_clock::now() + seconds(2));
  beast::error_code ec;
  acceptor.close(ec);
  ctx.log->info("closing {} connections", sessions.size());
  for (auto& s : sessions) s.emit(net::cancellation_type::terminal);
  co_await wait_until([&] { return sessions.empty(); }, steady_clock::now() + seconds(2));
  sched_idle_off();
  signals.cancel();
  ctx.prep.stop();  // preparation not yet started never starts
  ioc.stop();
}

// Waits up to `limit` for the prep threads to finish what they run. A thread
// stuck in long work must not keep the process alive: past the limit the
// join is left to a detached thread and the Server's state is leaked.
bool Server::Impl::drain_prep(std::chrono::milliseconds limit) {
  ctx.prep.stop();
  auto joined = std::make_shared<std::promise<void>>();
  auto done = joined->get_future();
  std::thread([&pool = ctx.prep, joined] {
    pool.join();
    joined->set_value();
  }).detach();
  return done.wait_for(limit) == std::future_status::ready;
}

Server::Server(Engine& engine, sched::Scheduler& scheduler, sched::Metrics& metrics,
               ServerOptions opts)
    : impl_(std::make_unique<Impl>(engine, scheduler, metrics, std::move(opts))) {
  auto& ctx = impl_->ctx;
  ctx.created = unix_now();
  ctx.model_id = ctx.opts.model_name;
  const Tokenizer& tok = engine.tokenizer();
  const auto open = tok.token_id("<think>"), close = tok.token_id("</think>");
  if (open && close) ctx.think_open = *open;
  ctx.split_reasoning = ctx.opts.reasoning_format == ReasoningFormat::Deepseek ||
                        (ctx.opts.reasoning_format == ReasoningFormat::Auto && open && close);
  if (ctx.split_reasoning)
    ctx.log->info("reasoning output: <think> ... </think> goes to reasoning_content");
  if (ctx.files.root().empty())
    ctx.log->warn("web/ not found: the demo page is not served (use --web-root)");
}

Server::~Server() {
  // Preparation still running uses ctx and the io_context: leave them be.
  if (impl_ && impl_->prep_abandoned) (void)impl_.release();
}

bool Server::preparation_abandoned() const {
  return impl_->prep_abandoned;
}

void Server::listen() {
  auto& im = *impl_;
  beast::error_code ec;
  tcp::endpoint ep;
  if (const auto addr = net::ip::make_address(im.ctx.opts.host, ec); !ec) {
    ep = tcp::endpoint(addr, im.ctx.opts.port);
  } else {  // a host name such as "localhost"
    tcp::resolver resolver(im.ioc);
    const auto found = resolver.resolve(im.ctx.opts.host, std::to_string(im.ctx.opts.port),
                                        tcp::resolver::passive, ec);
    if (ec || found.empty())
      throw InvalidArgument("--host: cannot resolve '" + im.ctx.opts.host + "'");
    ep = found.begin()->endpoint();
  }
  const std::string where = im.ctx.opts.host + ":" + std::to_string(im.ctx.opts.port);
  im.acceptor.open(ep.protocol(), ec);
  if (!ec) im.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(ep, ec);
  if (!ec) im.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw IoError("cannot listen on " + where + ": " + ec.message());
}

uint16_t Server::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void Server::run() {
  auto& im = *impl_;
  if (!im.acceptor.is_open()) listen();
  im.ctx.log->info("listening on http://{}:{} (model {}, web {})", im.ctx.opts.host, port(),
                   im.ctx.model_id, im.ctx.files.root().empty() ? "off" : im.ctx.files.root());
  im.signals.async_wait([&im](const beast::error_code& ec, int sig) {
    if (ec) return;
    im.ctx.log->info("signal {} received", sig);
    im.begin_shutdown();
  });
  net::co_spawn(im.ioc, im.accept_loop(), net::detached);
  im.ioc.run();
  if (!im.drain_prep(kPrepDrain)) {
    im.prep_abandoned = true;
    im.ctx.log->warn("request preparation still running {} ms after shutdown: not waiting for it",
                     kPrepDrain.count());
  }
  im.ctx.log->info("server stopped");
}

void Server::stop() {
  net::post(impl_->ioc, [im = impl_.get()] { im->begin_shutdown(); });
}

}  // namespace tern::server
