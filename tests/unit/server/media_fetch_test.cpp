// The remote media fetcher against real loopback sockets: a peer that accepts
// and never answers (the time limit), one that answers a fixed response; the
// address filter (loopback refused unless allowed, whatever its spelling)
// and the redirect targets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "tern/server/remote_media.h"

namespace tern::server {
namespace {

namespace asio = boost::asio;

// A loopback listener; serve() answers each connection with `reply` (or
// nothing, holding the connection open, when reply is empty).
class Peer {
 public:
  explicit Peer(std::string reply, int connections = 1) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, connections] {
      for (int i = 0; i < connections; ++i) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        ++accepted_;
        char buf[4096];
        (void)::recv(c, buf, sizeof buf, 0);  // the request
        if (reply_.empty()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        } else {
          (void)::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
        }
        ::close(c);
      }
    });
  }
  ~Peer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url(const std::string& path, const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port_) + path;
  }
  int accepted() const { return accepted_; }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

vision::MediaPolicy policy(int timeout_ms = 2000, std::vector<std::string> allow = {"127.0.0.1"}) {
  vision::MediaPolicy p;
  p.allow_remote = true;
  p.remote_timeout_ms = timeout_ms;
  p.max_bytes = 64;
  p.allow_hosts = std::move(allow);
  return p;
}

// The asynchronous fetch, run to its end on a private io_context.
std::vector<uint8_t> fetch(const std::string& url, const vision::MediaPolicy& p) {
  asio::io_context io;
  std::optional<std::vector<uint8_t>> got;
  std::exception_ptr error;
  asio::co_spawn(io, fetch_remote_media(url, p), [&](std::exception_ptr e, std::vector<uint8_t> b) {
    error = e;
    if (!e) got = std::move(b);
  });
  io.run();
  if (error) std::rethrow_exception(error);
  return *got;
}

vision::MediaErrorKind kind_of(const std::string& url, const vision::MediaPolicy& p,
                               std::string* msg = nullptr) {
  try {
    fetch(url, p);
  } catch (const vision::MediaError& e) {
    if (msg) *msg = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error for " << url;
  return vision::MediaErrorKind::Invalid;
}

const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";

TEST(MediaFetch, ReturnsTheBodyOfAnAllowedHost) {
  Peer peer(kOk);
  const std::vector<uint8_t> got = fetch(peer.url("/a.png"), policy());
  EXPECT_EQ(std::string(got.begin(), got.end()), "hello");
}

TEST(MediaFetch, AnAllowedHostNameCoversWhatItResolvesTo) {
  Peer peer(kOk);
  const std::vector<uint8_t> got =
      fetch(peer.url("/a.png", "localhost"), policy(2000, {"localhost"}));
  EXPECT_EQ(std::string(got.begin(), got.end()), "hello");
}

// Loopback is refused without an allow-list entry, in every spelling the
// resolver turns into 127.0.0.1, and the peer never sees a connection.
TEST(MediaFetch, LoopbackIsRefusedInEverySpelling) {
  Peer peer(kOk);
  for (const std::string host : {"127.0.0.1", "localhost", "127.1", "2130706433", "0x7f.1",
                                 "0177.0.0.1", "127.0.0.1.", "LOCALHOST"}) {
    std::string msg;
    EXPECT_EQ(kind_of(peer.url("/a.png", host), policy(2000, {}), &msg),
              vision::MediaErrorKind::Fetch)
        << host;
    EXPECT_EQ(msg, kFetchFailedText) << host;
  }
  // An allow-list entry for another address does not open loopback.
  EXPECT_EQ(kind_of(peer.url("/a.png"), policy(2000, {"10.0.0.5", "example.com"})),
            vision::MediaErrorKind::Fetch);
  EXPECT_EQ(peer.accepted(), 0);
}

TEST(MediaFetch, EveryFailureReadsTheSame) {
  std::vector<std::string> messages;
  auto failure = [&](const std::string& url, int timeout_ms = 2000) {
    std::string msg;
    EXPECT_EQ(kind_of(url, policy(timeout_ms), &msg), vision::MediaErrorKind::Fetch) << url;
    messages.push_back(msg);
  };
  {
    Peer peer("");  // silent: holds the connection 1.5 s, past the 300 ms limit
    const auto t0 = std::chrono::steady_clock::now();
    failure(peer.url("/slow"), 300);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1200));
  }
  {
    Peer peer("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n");
    failure(peer.url("/x"));
  }
  {
    Peer peer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
    failure(peer.url("/big"));  // over max_bytes
  }
  failure("http://127.0.0.1:1/x");                      // connection refused
  failure("http://169.254.169.254/latest/meta-data/");  // refused by the filter
  for (const std::string& m : messages) EXPECT_EQ(m, kFetchFailedText);
}

TEST(MediaFetch, MalformedUrlsAreInvalid) {
  EXPECT_EQ(kind_of("http://user:pw@127.0.0.1/x", policy()), vision::MediaErrorKind::Invalid);
  EXPECT_EQ(kind_of("http://127.0.0.1:notaport/x", policy()), vision::MediaErrorKind::Invalid);
}

TEST(MediaFetch, RedirectsToOtherSchemesAreRefusedByName) {
  for (const std::string loc : {"file:///etc/passwd", "gopher://127.0.0.1:70/_x", "FILE:/x",
                                "ftp://example.com/a.png", "javascript:alert(1)"}) {
    try {
      redirect_target("http://example.com/a/b.png", loc);
      ADD_FAILURE() << loc << " was followed";
    } catch (const vision::MediaError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + loc.substr(0, loc.find(':')) + ":'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(redirect_target("http://example.com/a/b.png", "HTTPS://x.org/c"), "HTTPS://x.org/c");
  EXPECT_EQ(redirect_target("http://example.com/a/b.png", "/c.png"), "http://example.com:80/c.png");
  EXPECT_EQ(redirect_target("https://example.com/a/b.png", "c.png"),
            "https://example.com:443/a/c.png");
  EXPECT_EQ(redirect_target("https://example.com/a", "//cdn.org/x"), "https://cdn.org/x");
  EXPECT_EQ(redirect_target("http://[2001:db8::1]:8080/a", "/b"), "http://[2001:db8::1]:8080/b");
}

TEST(MediaFetch, ARedirectToLoopbackIsRefused) {
  Peer target(kOk);
  Peer redirector("HTTP/1.1 302 Found\r\nLocation: " + target.url("/a.png", "127.1") +
                  "\r\nContent-Length: 0\r\n\r\n");
  // The first hop's host (by name) is allowed; the hop it redirects to is
  // checked again and is not.
  EXPECT_EQ(kind_of(redirector.url("/r", "localhost"), policy(2000, {"localhost"})),
            vision::MediaErrorKind::Fetch);
  EXPECT_EQ(redirector.accepted(), 1);
  EXPECT_EQ(target.accepted(), 0);
}

TEST(AddressFilter, OnlyPublicAddressesPass) {
  auto pub = [](const char* s) { return is_public_address(boost::asio::ip::make_address(s)); };
  for (const char* a : {"127.0.0.1",
                        "127.255.0.9",
                        "0.0.0.0",
                        "0.1.2.3",
                        "10.1.2.3",
                        "172.16.0.1",
                        "172.31.255.255",
                        "192.168.1.1",
                        "100.64.0.1",
                        "100.127.255.255",
                        "169.254.169.254",
                        "224.0.0.1",
                        "239.255.255.250",
                        "255.255.255.255",
                        "240.0.0.1",
                        "192.0.0.170",
                        "198.18.0.1",
                        "::",
                        "::1",
                        "fc00::1",
                        "fd12:3456::1",
                        "fe80::1",
                        "febf::1",
                        "ff02::1",
                        "::ffff:127.0.0.1",
                        "::ffff:10.0.0.1",
                        "::ffff:169.254.169.254",
                        "::ffff:0.0.0.0",
                        "::127.0.0.1",
                        "64:ff9b::7f00:1",
                        "2001:db8::1"})
    EXPECT_FALSE(pub(a)) << a;
  for (const char* a :
       {"8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.1", "100.63.255.255", "100.128.0.1",
        "169.253.0.1", "11.0.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"})
    EXPECT_TRUE(pub(a)) << a;
}

TEST(AddressFilter, AllowListMatchesNamesAndAddresses) {
  const auto lo = boost::asio::ip::make_address("127.0.0.1");
  const auto mapped = boost::asio::ip::make_address("::ffff:127.0.0.1");
  EXPECT_TRUE(is_allowed_host("LocalHost", lo, {"localhost"}));
  EXPECT_TRUE(is_allowed_host("127.1", lo, {"127.0.0.1"}));
  EXPECT_TRUE(is_allowed_host("x", mapped, {"127.0.0.1"}));
  EXPECT_FALSE(is_allowed_host("localhost", lo, {"10.0.0.5", "example.com"}));
  EXPECT_FALSE(is_allowed_host("localhost", lo, {}));
}

}  // namespace
}  // namespace tern::server
