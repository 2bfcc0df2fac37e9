// The remote media fetcher (--allow-remote-media): one GET per URL over
// Boost.Beast on the calling coroutine's executor (the reactor), TLS through
// OpenSSL with the system's CA store and host name verification.
// Limits: the whole fetch (all redirects) within policy.remote_timeout_ms,
// the body within policy.max_bytes (Beast's parser body limit), at most
// policy.max_redirects redirects, only http(s) redirect targets. Each hop
// resolves its host once, checks every address (remote_media.h's filter) and
// connects only to those. Every failure reaches the client as the same
// MediaError (kFetchFailedText); the detail goes to the server log.
#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>

#include "net.h"
#include "tern/core/log.h"
#include "tern/server/remote_media.h"

namespace tern::server {
namespace {

namespace ssl = net::ssl;
using vision::MediaError;
using vision::MediaErrorKind;
using Clock = std::chrono::steady_clock;

// A failure whose detail is for the log only.
struct FetchFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Url {
  bool tls = false;
  std::string host, port, target;
};

bool starts_with_nocase(const std::string& s, std::string_view p) {
  if (s.size() < p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (std::tolower(uint8_t(s[i])) != p[i]) return false;
  return true;
}

// Throws MediaError (Invalid) for a URL that is not a fetchable http(s) URL.
Url parse_url(const std::string& url) {
  auto invalid = [](const std::string& what) {
    throw MediaError(MediaErrorKind::Invalid, "fetching media: " + what);
  };
  Url u;
  std::string rest;
  if (starts_with_nocase(url, "https://")) {
    u.tls = true;
    rest = url.substr(8);
  } else if (starts_with_nocase(url, "http://")) {
    rest = url.substr(7);
  } else {
    throw MediaError(MediaErrorKind::Unsupported,
                     "fetching media: only http:// and https:// URLs can be fetched");
  }
  const size_t slash = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (const size_t hash = u.target.find('#'); hash != std::string::npos) u.target.resize(hash);
  if (u.target.empty() || u.target[0] != '/') u.target = "/" + u.target;
  if (authority.find('@') != std::string::npos) invalid("URLs with credentials are not fetched");
  u.port = u.tls ? "443" : "80";
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    u.port = authority.substr(colon + 1);
    authority.resize(colon);
  }
  if (authority.size() > 2 && authority.front() == '[' && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  if (authority.empty() || u.port.empty() ||
      u.port.find_first_not_of("0123456789") != std::string::npos || u.port.size() > 5)
    invalid("malformed URL");
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
    throw FetchFailure("the response is over the limit of " + std::to_string(max_bytes) + " bytes");
  if (ec) throw beast::system_error(ec);
  Reply r;
  r.status = parser.get().result_int();
  if (auto it = parser.get().find(http::field::location); it != parser.get().end())
    r.location = std::string(it->value());
  r.body = std::move(parser.get().body());
  co_return r;
}

// The host's addresses, every one checked against the filter: a host with
// one address that may not be fetched is refused as a whole.
awaitable<tcp::resolver::results_type> checked_endpoints(const Url& u,
                                                         const vision::MediaPolicy& policy) {
  tcp::resolver resolver(co_await net::this_coro::executor);
  // Numeric hosts never wait on DNS; other spellings of an IPv4 address
  // ("127.1", "2130706433", "0x7f.1") are resolved like names, and the
  // filter judges what they resolve to.
  const auto flags = tcp::resolver::numeric_service;
  auto [ec, results] = co_await resolver.async_resolve(u.host, u.port, flags, use_nothrow);
  if (ec) throw FetchFailure("cannot resolve: " + ec.message());
  if (results.empty()) throw FetchFailure("no addresses");
  for (const auto& e : results) {
    const net::ip::address a = e.endpoint().address();
    if (!is_public_address(a) && !is_allowed_host(u.host, a, policy.allow_hosts))
      throw FetchFailure(u.host + " resolves to " + a.to_string() +
                         ", a non-public address (allow it with --allow-media-hosts)");
  }
  co_return results;
}

ssl::context& tls_context() {
  static ssl::context* ctx = [] {
    auto* c = new ssl::context(ssl::context::tls_client);
    c->set_default_verify_paths();
    c->set_verify_mode(ssl::verify_peer);
    return c;
  }();
  return *ctx;
}

awaitable<Reply> get_once(const Url& u, const vision::MediaPolicy& policy,
                          Clock::time_point deadline) {
  auto ex = co_await net::this_coro::executor;
  const auto endpoints = co_await checked_endpoints(u, policy);
  if (Clock::now() >= deadline) throw beast::system_error(beast::error::timeout);
  if (!u.tls) {
    beast::tcp_stream s(ex);
    s.expires_at(deadline);
    co_await s.async_connect(endpoints, net::use_awaitable);
    co_return co_await exchange(s, u, policy.max_bytes);
  }
  beast::ssl_stream<beast::tcp_stream> s(ex, tls_context());
  beast::get_lowest_layer(s).expires_at(deadline);
  if (!SSL_set_tlsext_host_name(s.native_handle(), u.host.c_str()))
    throw FetchFailure("cannot set the TLS server name");
  s.set_verify_callback(ssl::host_name_verification(u.host));
  co_await beast::get_lowest_layer(s).async_connect(endpoints, net::use_awaitable);
  co_await s.async_handshake(ssl::stream_base::client, net::use_awaitable);
  co_return co_await exchange(s, u, policy.max_bytes);
}

// The body after following at most policy.max_redirects redirects. Throws
// FetchFailure / system_error (log detail) or MediaError (a bad request URL).
awaitable<std::vector<uint8_t>> follow(const std::string& url, const vision::MediaPolicy& policy) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(policy.remote_timeout_ms);
  std::string current = url;
  for (int hop = 0;; ++hop) {
    Url u;
    try {
      u = parse_url(current);
    } catch (const MediaError& e) {
      if (hop == 0) throw;  // the client's own URL: say what is wrong with it
      throw FetchFailure(std::string("a redirect to a bad URL: ") + e.what());
    }
    const Reply reply = co_await get_once(u, policy, deadline);
    const unsigned st = reply.status;
    if (st == 301 || st == 302 || st == 303 || st == 307 || st == 308) {
      if (reply.location.empty()) throw FetchFailure("a redirect without a Location");
      if (hop >= policy.max_redirects)
        throw FetchFailure("more than " + std::to_string(policy.max_redirects) + " redirects");
      try {
        current = redirect_target(current, reply.location);
      } catch (const MediaError& e) {
        throw FetchFailure(e.what());
      }
      continue;
    }
    if (st < 200 || st >= 300) throw FetchFailure("the server answered HTTP " + std::to_string(st));
    co_return std::move(reply.body);
  }
}

// "https://host:port/path" without the query (which may hold a secret).
std::string loggable(const std::string& url) {
  return url.substr(0, std::min(url.find_first_of("?#"), size_t(200)));
}

}  // namespace

std::string redirect_target(const std::string& from, const std::string& loc) {
  // A scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" (RFC 3986).
  const size_t colon = loc.find(':');
  const bool has_scheme =
      colon != std::string::npos && colon > 0 && std::isalpha(uint8_t(loc[0])) &&
      loc.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") ==
          colon;
  if (has_scheme) {
    if (starts_with_nocase(loc, "http://") || starts_with_nocase(loc, "https://")) return loc;
    throw MediaError(MediaErrorKind::Unsupported,
                     "a redirect to a '" + loc.substr(0, colon) + ":' URL is not followed");
  }
  const Url f = parse_url(from);
  const std::string scheme = f.tls ? "https:" : "http:";
  if (loc.rfind("//", 0) == 0) return scheme + loc;
  const std::string host = f.host.find(':') != std::string::npos ? "[" + f.host + "]" : f.host;
  const std::string origin = scheme + "//" + host + ":" + f.port;
  if (!loc.empty() && loc[0] == '/') return origin + loc;
  const size_t dir = f.target.rfind('/');
  return origin + f.target.substr(0, dir + 1) + loc;
}

awaitable<std::vector<uint8_t>> fetch_remote_media(std::string url,
                                                   const vision::MediaPolicy& policy) {
  std::string detail;
  try {
    co_return co_await follow(url, policy);
  } catch (const MediaError&) {
    throw;  // the request's URL itself is malformed
  } catch (const beast::system_error& e) {
    detail = e.code() == beast::error::timeout
                 ? "timed out after " + std::to_string(policy.remote_timeout_ms) + " ms"
                 : e.code().message();
  } catch (const std::exception& e) {
    detail = e.what();
  }
  log::get("server")->warn("remote media {} not fetched: {}", loggable(url), detail);
  throw MediaError(MediaErrorKind::Fetch, kFetchFailedText);
}

}  // namespace tern::server
