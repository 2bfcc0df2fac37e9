// The remote media fetcher against real loopback sockets: a peer that accepts
// and never answers (the time limit), one that answers a fixed response.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tern/server/media_parts.h"

namespace tern::server {
namespace {

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
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

vision::MediaPolicy policy(int timeout_ms = 2000) {
  vision::MediaPolicy p;
  p.allow_remote = true;
  p.remote_timeout_ms = timeout_ms;
  p.max_bytes = 64;
  return p;
}

vision::MediaErrorKind kind_of(const std::string& url, const vision::MediaPolicy& p,
                               std::string* msg = nullptr) {
  try {
    fetch_remote_media(url, p);
  } catch (const vision::MediaError& e) {
    if (msg) *msg = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error for " << url;
  return vision::MediaErrorKind::Invalid;
}

TEST(MediaFetch, ReturnsTheBody) {
  Peer peer("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  const std::vector<uint8_t> got = fetch_remote_media(peer.url("/a.png"), policy());
  EXPECT_EQ(std::string(got.begin(), got.end()), "hello");
}

TEST(MediaFetch, ASilentPeerHitsTheTimeLimit) {
  Peer peer("");
  std::string msg;
  EXPECT_EQ(kind_of(peer.url("/slow"), policy(300), &msg), vision::MediaErrorKind::Fetch);
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  // (The peer holds the connection 1.5 s; without the limit the fetch would
  // end with the peer's close, not "timed out".)
}

TEST(MediaFetch, BodyLimitStatusAndMalformedUrls) {
  {
    Peer peer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
    EXPECT_EQ(kind_of(peer.url("/big"), policy()), vision::MediaErrorKind::TooLarge);
  }
  {
    Peer peer("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n");
    std::string msg;
    EXPECT_EQ(kind_of(peer.url("/x"), policy(), &msg), vision::MediaErrorKind::Fetch);
    EXPECT_NE(msg.find("500"), std::string::npos) << msg;
  }
  EXPECT_EQ(kind_of("http://user:pw@127.0.0.1/x", policy()), vision::MediaErrorKind::Invalid);
  EXPECT_EQ(kind_of("http://127.0.0.1:notaport/x", policy()), vision::MediaErrorKind::Invalid);
}

}  // namespace
}  // namespace tern::server
