#include "tern/server/api_error.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tern::server {
namespace {

// The one exception -> API error mapping every route and the WebSocket use.
TEST(ApiError, FromMapsEachKindOfException) {
  const ApiError kept = ApiError::from(ApiError(429, "rate_limit_error", "busy", "", "queue_full"));
  EXPECT_EQ(kept.status(), 429);
  EXPECT_EQ(kept.type(), "rate_limit_error");
  EXPECT_EQ(kept.code(), "queue_full");

  const ApiError bad = ApiError::from(InvalidArgument("'n' must be 1"));
  EXPECT_EQ(bad.status(), 400);
  EXPECT_EQ(bad.type(), "invalid_request_error");
  EXPECT_STREQ(bad.what(), "'n' must be 1");

  const ApiError internal = ApiError::from(std::runtime_error("boom"));
  EXPECT_EQ(internal.status(), 500);
  EXPECT_EQ(internal.type(), "server_error");
  EXPECT_STREQ(internal.what(), "Internal error: boom");
}

}  // namespace
}  // namespace tern::server
