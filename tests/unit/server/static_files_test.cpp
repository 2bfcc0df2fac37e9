#include "tern/server/static_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testutil.h"

namespace tern::server {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

TEST(StaticFiles, ServesInsideRootOnly) {
  const fs::path root = test::temp_path("web_root");
  write(root / "index.html", "<html>hi</html>");
  write(root / "app.js", "let x = 1;");
  write(root / "sub" / "style.css", "body{}");
  write(root / ".secret", "no");
  write(fs::path(test::temp_path("outside.txt")), "secret");
  std::error_code ec;
  fs::create_symlink(test::temp_path("outside.txt"), root / "link.txt", ec);

  StaticFiles files(root.string());
  auto index = files.get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->body, "<html>hi</html>");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  ASSERT_TRUE(files.get("/app.js"));
  EXPECT_EQ(files.get("/app.js")->content_type, "text/javascript; charset=utf-8");
  ASSERT_TRUE(files.get("/sub/style.css"));

  for (const char* bad :
       {"/../outside.txt", "/sub/../../outside.txt", "/./index.html", "/.secret", "/sub/", "/sub",
        "//etc/passwd", "/sub\\style.css", "index.html", "/missing.js", "/link.txt"})
    EXPECT_FALSE(files.get(bad)) << bad;
}

TEST(StaticFiles, DisabledWithoutRoot) {
  StaticFiles none("");
  EXPECT_FALSE(none.get("/"));
  StaticFiles missing("/nonexistent/dir/for/tern");
  EXPECT_TRUE(missing.root().empty());
}

TEST(StaticFiles, FindsTheSourceTreeWebDir) {
  EXPECT_EQ(StaticFiles::find_root("/x/y"), "/x/y");
}

}  // namespace
}  // namespace tern::server
