// The remote media fetcher (--allow-remote-media): one GET per URL over
// Boost.Beast, TLS through OpenSSL with the system's CA store and host name
// verification, on a private io_context run on the calling (prep) thread.
// Limits: the whole fetch (all redirects) within policy.remote_timeout_ms,
// the body within policy.max_bytes (Beast's parser body limit), at most
// policy.max_redirects redirects. Any failure is a MediaError (Fetch or
// TooLarge) that the chat parser turns into a 400.
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>

#include "net.h"
#include "tern/server/media_parts.h"

namespace tern::server {
namespace {

namespace ssl = net::ssl;
using vision::MediaError;
using vision::MediaErrorKind;
using Clock = std::chrono::steady_clock;

struct Url {
  bool tls = false;
  std::string host, port, target;
};

[[noreturn]] void fail(const std::string& what, MediaErrorKind k = MediaErrorKind::Fetch) {
  throw MediaError(k, "fetching media: " + what);
}

Url parse_url(const std::string& url) {
  Url u;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    fail("only http:// and https:// URLs can be fetched", MediaErrorKind::Unsupported);
  }
  const size_t slash = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (const size_t hash = u.target.find('#'); hash != std::string::npos) u.target.resize(hash);
  if (u.target.empty() || u.target[0] != '/') u.target = "/" + u.target;
  if (authority.find('@') != std::string::npos)
    fail("URLs with credentials are not fetched", MediaErrorKind::Invalid);
  u.port = u.tls ? "443" : "80";
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    u.port = authority.substr(colon + 1);
    authority.resize(colon);
  }
  if (authority.size() > 2 && authority.front() == '[' && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  if (authority.empty() || u.port.empty() ||
      u.port.find_first_not_of("0123456789") != std::string::npos)
    fail("malformed URL '" + url + "'", MediaErrorKind::Invalid);
  u.host = authority;
  return u;
}

struct Reply {
  unsigned status = 0;
  std::string location;
  std::vector<uint8_t> body;
};

// One request/response on a connected stream (plain or TLS).
template <typename Stream>
awaitable<Reply> exchange(Stream& s, const Url& u, size_t max_bytes) {
  http::request<http::empty_body> req{http::verb::get, u.target, 11};
  req.set(http::field::host, u.host);
  req.set(http::field::user_agent, "tern");
  req.set(http::field::accept, "image/*, video/*");
  co_await http::async_write(s, req, net::use_awaitable);
  beast::flat_buffer buf;
  http::response_parser<http::vector_body<uint8_t>> parser;
  parser.body_limit(max_bytes);
  auto [ec, n] = co_await http::async_read(s, buf, parser, use_nothrow);
  if (ec == http::error::body_limit)
    fail("the response is over the limit of " + std::to_string(max_bytes) + " bytes",
         MediaErrorKind::TooLarge);
  if (ec) throw beast::system_error(ec);
  Reply r;
  r.status = parser.get().result_int();
  if (auto it = parser.get().find(http::field::location); it != parser.get().end())
    r.location = std::string(it->value());
  r.body = std::move(parser.get().body());
  co_return r;
}

awaitable<Reply> get_once(const Url& u, size_t max_bytes, Clock::time_point deadline,
                          ssl::context& tls) {
  auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  const auto endpoints = co_await resolver.async_resolve(u.host, u.port, net::use_awaitable);
  if (!u.tls) {
    beast::tcp_stream s(ex);
    s.expires_at(deadline);
    co_await s.async_connect(endpoints, net::use_awaitable);
    co_return co_await exchange(s, u, max_bytes);
  }
  beast::ssl_stream<beast::tcp_stream> s(ex, tls);
  beast::get_lowest_layer(s).expires_at(deadline);
  if (!SSL_set_tlsext_host_name(s.native_handle(), u.host.c_str()))
    fail("cannot set the TLS server name");
  s.set_verify_callback(ssl::host_name_verification(u.host));
  co_await beast::get_lowest_layer(s).async_connect(endpoints, net::use_awaitable);
  co_await s.async_handshake(ssl::stream_base::client, net::use_awaitable);
  co_return co_await exchange(s, u, max_bytes);
}

// The Location of a redirect, made absolute against `from`.
std::string resolve_location(const Url& from, const std::string& loc) {
  if (loc.rfind("http://", 0) == 0 || loc.rfind("https://", 0) == 0) return loc;
  const std::string origin =
      std::string(from.tls ? "https://" : "http://") + from.host + ":" + from.port;
  if (loc.rfind("//", 0) == 0) return (from.tls ? "https:" : "http:") + loc;
  if (!loc.empty() && loc[0] == '/') return origin + loc;
  const size_t dir = from.target.rfind('/');
  return origin + from.target.substr(0, dir + 1) + loc;
}

}  // namespace

std::vector<uint8_t> fetch_remote_media(const std::string& url, const vision::MediaPolicy& policy) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(policy.remote_timeout_ms);
  ssl::context tls(ssl::context::tls_client);
  tls.set_default_verify_paths();
  tls.set_verify_mode(ssl::verify_peer);
  std::string current = url;
  for (int hop = 0;; ++hop) {
    const Url u = parse_url(current);
    std::optional<Reply> reply;
    std::exception_ptr error;
    net::io_context io;  // destroyed first: a pending operation's handler never runs
    net::co_spawn(io, get_once(u, policy.max_bytes, deadline, tls),
                  [&](std::exception_ptr e, Reply r) {
                    if (e)
                      error = e;
                    else
                      reply = std::move(r);
                  });
    io.run_until(deadline + std::chrono::milliseconds(100));
    if (!reply && !error)
      fail("timed out after " + std::to_string(policy.remote_timeout_ms) + " ms");
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const MediaError&) {
        throw;
      } catch (const beast::system_error& e) {
        if (e.code() == beast::error::timeout)
          fail("timed out after " + std::to_string(policy.remote_timeout_ms) + " ms");
        fail(u.host + ": " + e.code().message());
      }
    }
    const unsigned st = reply->status;
    if (st == 301 || st == 302 || st == 303 || st == 307 || st == 308) {
      if (reply->location.empty()) fail("a redirect without a Location");
      if (hop >= policy.max_redirects)
        fail("more than " + std::to_string(policy.max_redirects) + " redirects");
      current = resolve_location(u, reply->location);
      continue;
    }
    if (st < 200 || st >= 300) fail("the server answered HTTP " + std::to_string(st));
    return std::move(reply->body);
  }
}

}  // namespace tern::server
