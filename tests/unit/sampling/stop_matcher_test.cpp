#include "tern/sampling/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tern/core/error.h"

namespace tern {
namespace {

// Pushes every piece and returns everything emitted (plus flush() if it
// never stopped).
std::string stream(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += m.push(p).emit;
  if (!m.stopped()) out += m.flush();
  return out;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80             ? 1
                       : (c & 0xE0) == 0xC0 ? 2
                       : (c & 0xF0) == 0xE0 ? 3
                       : (c & 0xF8) == 0xF0 ? 4
                                            : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST(StopMatcher, StopSplitAcrossPushes) {
  StopMatcher m({"lo w"});
  StopMatcher::Result r = m.push("Hel");
  EXPECT_EQ(r.emit, "He");  // "l" could start "lo w"
  EXPECT_FALSE(r.stopped);
  r = m.push("lo wo");
  EXPECT_EQ(r.emit, "l");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(m.matched(), 0);
  r = m.push("rld");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, PartialPrefixIsHeldThenReleasedWhenItDiverges) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.push("a<").emit, "a");
  EXPECT_EQ(m.push("/").emit, "");
  EXPECT_EQ(m.push("s").emit, "");
  const StopMatcher::Result r = m.push("x>");
  EXPECT_EQ(r.emit, "</sx>");
  EXPECT_FALSE(r.stopped);
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HeldTextCanStartAStopAgain) {
  // "<<" diverges from "<s>" at its second char, which itself restarts it.
  StopMatcher m({"<s>"});
  EXPECT_EQ(m.push("x<").emit, "x");
  EXPECT_EQ(m.push("<").emit, "<");
  const StopMatcher::Result r = m.push("s>tail");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher a({"world", "lo"});
  StopMatcher::Result r = a.push("hello world");
  EXPECT_EQ(r.emit, "hel");
  EXPECT_EQ(a.matched(), 1);

  StopMatcher b({"cd", "abcd"});  // both complete in one push: earliest start
  r = b.push("xabcdy");
  EXPECT_EQ(r.emit, "x");
  EXPECT_EQ(b.matched(), 1);

  StopMatcher c({"abcd", "bc"});  // across pushes: the first to complete
  EXPECT_EQ(c.push("ab").emit, "");
  r = c.push("c");
  EXPECT_EQ(r.emit, "a");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(c.matched(), 1);
}

TEST(StopMatcher, Utf8StaysIntact) {
  // "héllo wörld" with the stop "wö", pushed with characters cut in two.
  StopMatcher m({"w\xC3\xB6"});
  std::vector<std::string> emitted;
  for (const char* piece : {"h\xC3", "\xA9llo w", "\xC3", "\xB6rld"}) {
    const StopMatcher::Result r = m.push(piece);
    EXPECT_TRUE(valid_utf8(r.emit)) << r.emit;
    emitted.push_back(r.emit);
  }
  EXPECT_EQ(emitted, (std::vector<std::string>{"h", "\xC3\xA9llo ", "", ""}));
  EXPECT_TRUE(m.stopped());

  // Same lead byte, different character: no false match, nothing held.
  StopMatcher e({"\xC3\xA9"});                     // "é"
  EXPECT_EQ(e.push("\xC3\xB6").emit, "\xC3\xB6");  // "ö"
  EXPECT_EQ(e.push("\xC3").emit, "");
  EXPECT_TRUE(e.push("\xA9!").stopped);
}

TEST(StopMatcher, NeverCutsACharacterEvenForAStopStartingMidCharacter) {
  StopMatcher m({"\xA9x"});                     // starts with a continuation byte
  StopMatcher::Result r = m.push("a\xC3\xA9");  // "aé": its last byte could start the stop
  EXPECT_EQ(r.emit, "a");
  r = m.push("y");
  EXPECT_EQ(r.emit, "\xC3\xA9y");
  EXPECT_FALSE(r.stopped);
}

TEST(StopMatcher, FlushReleasesHeldText) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abc ST").emit, "abc ");
  EXPECT_EQ(m.flush(), "ST");
  EXPECT_EQ(m.flush(), "");

  StopMatcher u({});
  EXPECT_EQ(u.push("x\xE2\x82").emit, "x");  // incomplete "€"
  EXPECT_EQ(u.flush(), "\xE2\x82");
}

TEST(StopMatcher, NoStopsPassesTextThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello ").emit, "hello ");
  EXPECT_EQ(m.push("world").emit, "world");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, RejectsEmptyStopString) {
  EXPECT_THROW(StopMatcher({"ok", ""}), InvalidArgument);
}

TEST(StopMatcher, RandomChunkingMatchesAWholeTextSearch) {
  // Neither stop contains the other, so the first to complete is also the one
  // that starts first, and the answer must not depend on how text is cut.
  const std::vector<std::string> stops = {"abca", "cab"};
  std::mt19937 gen(8);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const size_t len = gen() % 20;
    for (size_t i = 0; i < len; ++i) text += "abc"[gen() % 3];
    size_t cut = std::string::npos;
    for (const std::string& s : stops) cut = std::min(cut, text.find(s));

    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t n = 1 + gen() % 4;
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    StopMatcher m(stops);
    const std::string got = stream(m, pieces);
    EXPECT_EQ(got, text.substr(0, cut)) << text;
    EXPECT_EQ(m.stopped(), cut != std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tern
