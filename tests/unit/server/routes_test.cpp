// The route table: lookups, methods, the API key, and README's route list.
#include "../../../src/server/routes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace tern::server {
namespace {

TEST(Routes, FindsExactAndPrefixRoutes) {
  ASSERT_NE(find_route("/v1/chat/completions"), nullptr);
  EXPECT_EQ(find_route("/v1/chat/completions")->route, Route::Chat);
  EXPECT_EQ(find_route("/v1/responses")->route, Route::Responses);
  EXPECT_EQ(find_route("/v1/responses/resp_1")->route, Route::StoredResponse);
  EXPECT_EQ(find_route("/v1/models/x")->route, Route::Model);
  EXPECT_EQ(find_route("/v1/responses/"), nullptr) << "an id after the prefix is required";
  EXPECT_EQ(find_route("/v1/chat/completions/x"), nullptr);
  EXPECT_EQ(find_route("/index.html"), nullptr);
}

TEST(Routes, MethodsAndTheKey) {
  const RouteSpec& stored = *find_route("/v1/responses/r");
  EXPECT_TRUE(route_allows(stored, http::verb::get));
  EXPECT_TRUE(route_allows(stored, http::verb::head));
  EXPECT_TRUE(route_allows(stored, http::verb::delete_));
  EXPECT_TRUE(route_allows(stored, http::verb::options));
  EXPECT_FALSE(route_allows(stored, http::verb::post));
  EXPECT_FALSE(route_allows(*find_route("/tokenize"), http::verb::get));
  EXPECT_TRUE(route_allows(*find_route("/v1/adapters"), http::verb::post));
  EXPECT_FALSE(needs_api_key("/health"));
  EXPECT_TRUE(needs_api_key("/metrics"));
  EXPECT_TRUE(needs_api_key("/tokenize"));
  EXPECT_TRUE(needs_api_key("/v1/no-such-route")) << "unknown /v1/ paths reveal nothing";
  EXPECT_FALSE(needs_api_key("/app.js"));
  Request req{http::verb::post, "/v1/responses/r?x=1", 11};
  const Response res = method_not_allowed(req, stored);
  EXPECT_EQ(res.result_int(), 405u);
  EXPECT_EQ(res[http::field::allow], "GET, DELETE");
}

// README's route table lists every route and method of the table, and no other.
TEST(Routes, ReadmeListsEveryRoute) {
  std::ifstream f(std::string(TERN_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(f) << "README.md";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string readme = ss.str();
  const size_t at = readme.find("| route | what |");
  ASSERT_NE(at, std::string::npos);
  const std::string table = readme.substr(at, readme.find("\n\n", at) - at);
  std::set<std::string> documented;
  const std::regex entry("`(GET|POST|DELETE) (/[^`{ ]*)(\\{[a-z_]+\\})?`");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), entry);
       it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1].str() + " " + (*it)[2].str());
  documented.erase("GET /");  // the demo page: static files are the fallback, not a route
  std::set<std::string> served;
  for (const RouteSpec& r : route_table()) {
    for (const char* m : {"GET", "POST", "DELETE"})
      if (route_allows(r, http::string_to_verb(m)))
        served.insert(std::string(m) + " " + std::string(r.path));
  }
  EXPECT_EQ(documented, served);
}

}  // namespace
}  // namespace tern::server
