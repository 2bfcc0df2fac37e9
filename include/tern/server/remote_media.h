#pragma once
// Remote media (--allow-remote-media) without a preparation thread ever
// waiting on the network:
//
//   prep thread:  parse the request; a remote URL whose bytes are not in the
//                 request's FetchedMedia -> throw NeedsRemoteMedia{urls}
//   reactor:      fetch those URLs (fetch_remote_media: Beast, asynchronous,
//                 bounded per client and in all by FetchGate), each result
//                 (bytes or a MediaError) into the request's FetchedMedia
//   prep thread:  parse again inside a FetchedMediaScope: the policy's
//                 fetcher (fetched_media_bytes) hands the bytes to the
//                 decoders as if they had been read there
//
// The address filter: a remote host is fetched only when every address it
// resolves to is public (not loopback, private, shared, link-local,
// multicast, unspecified or reserved; IPv4-mapped and -embedded IPv6 forms
// are judged by their IPv4 address), unless the URL's host or the address
// is in the policy's allow_hosts (--allow-media-hosts). The connection goes
// only to the addresses that were checked, on every redirect hop.
//
// Every fetch failure reads the same to the client (kFetchFailedText); what
// went wrong is written to the server log.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tern/vision/media_source.h"

namespace tern::server {

inline constexpr const char* kFetchFailedText =
    "fetching media: the URL could not be fetched (see the server log)";

// Whether an address may be fetched without an allow-list entry.
bool is_public_address(const boost::asio::ip::address& a);

// Whether `host` (the URL's host, without brackets) resolving to `a` is
// exempt from the address filter: the host name or the address is listed.
bool is_allowed_host(const std::string& host, const boost::asio::ip::address& a,
                     const std::vector<std::string>& allow_hosts);

// A redirect's Location made absolute against `from` (an http(s) URL).
// Throws MediaError for a Location with a scheme other than http or https.
std::string redirect_target(const std::string& from, const std::string& location);

// One GET (and its redirects) on the calling coroutine's executor, within the
// policy's time, size and redirect limits and the address filter. Throws
// MediaError: Fetch with kFetchFailedText for every network-side failure,
// Invalid for a malformed request URL.
boost::asio::awaitable<std::vector<uint8_t>> fetch_remote_media(std::string url,
                                                                const vision::MediaPolicy& policy);

// The remote bytes one request has fetched (or the error each fetch gave).
class FetchedMedia {
 public:
  using Result = std::variant<std::vector<uint8_t>, vision::MediaError>;
  bool has(const std::string& url) const { return results_.count(url) != 0; }
  void put(const std::string& url, Result r) { results_.insert_or_assign(url, std::move(r)); }
  // The bytes, or the fetch's MediaError thrown.
  std::vector<uint8_t> bytes(const std::string& url) const;

 private:
  std::map<std::string, Result> results_;
};

// Thrown by the preparation (MediaService::check_chat_request) when a
// request names remote URLs that the current FetchedMediaScope lacks.
class NeedsRemoteMedia : public std::exception {
 public:
  explicit NeedsRemoteMedia(std::vector<std::string> urls) : urls_(std::move(urls)) {}
  const char* what() const noexcept override { return "the request needs remote media"; }
  const std::vector<std::string>& urls() const { return urls_; }

 private:
  std::vector<std::string> urls_;
};

// Makes a request's FetchedMedia visible to the preparation that runs on
// this thread while the scope lives (a preparation never suspends, so it
// stays on one thread from start to end).
class FetchedMediaScope {
 public:
  explicit FetchedMediaScope(const FetchedMedia& f);
  ~FetchedMediaScope();
  FetchedMediaScope(const FetchedMediaScope&) = delete;
  FetchedMediaScope& operator=(const FetchedMediaScope&) = delete;
  static const FetchedMedia* current();

 private:
  const FetchedMedia* previous_;
};

// The server's RemoteFetcher: the current scope's bytes for `url`. Never
// touches the network; a URL not fetched beforehand is a Fetch error.
std::vector<uint8_t> fetched_media_bytes(const std::string& url, const vision::MediaPolicy& policy);

}  // namespace tern::server
