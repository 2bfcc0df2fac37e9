// The one TU that compiles Boost.Asio's and Boost.Beast's library sources
// (both are otherwise header-only); the rest of tern_server is built with
// BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>  // TLS for the remote media fetcher
#include <boost/beast/src.hpp>
