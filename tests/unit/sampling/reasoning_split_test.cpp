#include "tern/sampling/reasoning_split.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace tern {
namespace {

using Parts = ReasoningSplitter::Parts;

// Feeds `text` in pieces cut at the given random seed; checks that nothing
// emitted is ever taken back (the concatenation equals the one-shot split).
Parts split_in_pieces(const std::string& text, bool start_in_reasoning, uint32_t seed) {
  std::mt19937 rng(seed);
  ReasoningSplitter s(start_in_reasoning);
  Parts all;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = 1 + rng() % 4;
    Parts p = s.push(std::string_view(text).substr(i, n));
    all.reasoning += p.reasoning;
    all.content += p.content;
    i += n;
  }
  Parts p = s.flush();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

struct Case {
  std::string text;
  bool start_in_reasoning;
  std::string reasoning, content;
};

TEST(ReasoningSplit, SplitsWholeAndStreamedAlike) {
  const Case cases[] = {
      {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "Let me see.",
       "The answer is 4."},
      {"  \n<think>a</think>b", false, "a", "b"},
      {"Hello there", false, "", "Hello there"},
      {"\n\nHello", false, "", "\n\nHello"},
      {"<thin", false, "", "<thin"},  // a partial tag at the end is text
      {"<thinking about it", false, "", "<thinking about it"},
      {"no <think>tags</think> mid-answer", false, "", "no <think>tags</think> mid-answer"},
      {"<think>never closed\n", false, "never closed", ""},
      {"<think>a < b and </thi", false, "a < b and </thi", ""},
      {"forced thinking\n</think>\nanswer", true, "forced thinking", "answer"},
      {"\n</think>\n\nonly answer", true, "", "only answer"},
      {"<think></think>x", false, "", "x"},
      {"<think>line one\n\nline two  \n</think> \t\nA\n\nB\n", false, "line one\n\nline two",
       "A\n\nB\n"},
      {"", false, "", ""},
      {"<think>1</think>2</think>3", false, "1", "2</think>3"},
  };
  for (const Case& c : cases) {
    Parts whole = ReasoningSplitter::split(c.text, c.start_in_reasoning);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(whole.content, c.content) << c.text;
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      Parts p = split_in_pieces(c.text, c.start_in_reasoning, seed);
      EXPECT_EQ(p.reasoning, c.reasoning) << c.text << " seed " << seed;
      EXPECT_EQ(p.content, c.content) << c.text << " seed " << seed;
    }
  }
}

TEST(ReasoningSplit, ShowsReasoningAsItStreams) {
  ReasoningSplitter s;
  EXPECT_TRUE(s.push("<th").empty());  // could still be the open tag
  EXPECT_TRUE(s.push("ink>\n").empty());
  EXPECT_EQ(s.push("Step one").reasoning, "Step one");
  EXPECT_EQ(s.push(", two\n").reasoning, ", two");  // the newline waits: it may precede the close
  Parts p = s.push("three</");
  EXPECT_EQ(p.reasoning, "\nthree");
  p = s.push("think>\n\nDone");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Done");
  EXPECT_EQ(s.push(" now.").content, " now.");
  EXPECT_TRUE(s.flush().empty());
}

TEST(ReasoningSplit, AnswerWithoutReasoningIsNotDelayedPastTheFirstWord) {
  ReasoningSplitter s;
  EXPECT_EQ(s.push("Sure").content, "Sure");
  EXPECT_EQ(s.push(", <think>").content, ", <think>");
}

}  // namespace
}  // namespace tern
