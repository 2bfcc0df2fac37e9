#pragma once
// Boost.Asio / Beast names used across the reactor. The library sources are
// compiled once (BOOST_ASIO_SEPARATE_COMPILATION / BOOST_BEAST_SEPARATE_COMPILATION,
// see boost_impl.cpp), so every TU that includes this stays lighter.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tern::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using net::awaitable;

// Completion token for coroutines that handle expected errors inline:
// `auto [ec, n] = co_await op(..., use_nothrow);`
inline constexpr auto use_nothrow = net::as_tuple(net::use_awaitable);

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

}  // namespace tern::server
