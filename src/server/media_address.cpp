// The remote media address filter (remote_media.h): which resolved addresses
// a fetch may connect to, and the --allow-media-hosts exemptions.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

#include "tern/server/remote_media.h"

namespace tern::server {
namespace {

namespace ip = boost::asio::ip;

struct V4Range {
  uint32_t base;
  int bits;
};

// Not the public internet: "this network", private, shared (CGNAT),
// loopback, link-local (cloud metadata), IETF protocol assignments, TEST-NETs,
// benchmarking, multicast, reserved and broadcast.
constexpr std::array<V4Range, 14> kBlockedV4 = {{
    {0x00000000, 8},   // 0.0.0.0/8
    {0x0A000000, 8},   // 10.0.0.0/8
    {0x64400000, 10},  // 100.64.0.0/10
    {0x7F000000, 8},   // 127.0.0.0/8
    {0xA9FE0000, 16},  // 169.254.0.0/16
    {0xAC100000, 12},  // 172.16.0.0/12
    {0xC0000000, 24},  // 192.0.0.0/24
    {0xC0000200, 24},  // 192.0.2.0/24
    {0xC0A80000, 16},  // 192.168.0.0/16
    {0xC6120000, 15},  // 198.18.0.0/15
    {0xC6336400, 24},  // 198.51.100.0/24
    {0xCB007100, 24},  // 203.0.113.0/24
    {0xE0000000, 4},   // 224.0.0.0/4 multicast
    {0xF0000000, 4},   // 240.0.0.0/4 reserved, 255.255.255.255 broadcast
}};

bool public_v4(const ip::address_v4& a) {
  const uint32_t v = a.to_uint();
  return std::none_of(kBlockedV4.begin(), kBlockedV4.end(), [v](const V4Range& r) {
    return (v >> (32 - r.bits)) == (r.base >> (32 - r.bits));
  });
}

// The IPv4 address carried in the last 4 bytes of `b`.
ip::address_v4 low_v4(const ip::address_v6::bytes_type& b) {
  return ip::address_v4(ip::address_v4::bytes_type{b[12], b[13], b[14], b[15]});
}

bool public_v6(const ip::address_v6& a) {
  const ip::address_v6::bytes_type b = a.to_bytes();
  const bool first10_zero =
      std::all_of(b.begin(), b.begin() + 10, [](uint8_t x) { return x == 0; });
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, which also covers ::
  // and ::1): judged by the IPv4 address, which is what the kernel reaches.
  if (first10_zero && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)))
    return public_v4(low_v4(b)) && !a.is_unspecified() && !a.is_loopback();
  // 64:ff9b::/96 (NAT64) embeds an IPv4 address too.
  static constexpr std::array<uint8_t, 12> kNat64 = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::equal(kNat64.begin(), kNat64.end(), b.begin())) return public_v4(low_v4(b));
  if ((b[0] & 0xfe) == 0xfc) return false;                  // fc00::/7 unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return false;  // fe80::/10 link-local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return false;  // fec0::/10 site-local
  if (b[0] == 0xff) return false;                           // ff00::/8 multicast
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return false;  // 2001:db8::/32
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

// A v4-mapped IPv6 address as its IPv4 form, so either spelling matches.
ip::address canonical(const ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  return a;
}

}  // namespace

bool is_public_address(const ip::address& a) {
  return a.is_v4() ? public_v4(a.to_v4()) : public_v6(a.to_v6());
}

bool is_allowed_host(const std::string& host, const ip::address& a,
                     const std::vector<std::string>& allow_hosts) {
  const std::string h = lower(host);
  for (const std::string& entry : allow_hosts) {
    if (lower(entry) == h) return true;
    boost::system::error_code ec;
    const ip::address listed = ip::make_address(entry, ec);
    if (!ec && canonical(listed) == canonical(a)) return true;
  }
  return false;
}

}  // namespace tern::server
