// The unigram vocabulary of the generated XLM-RoBERTa cases, written as
// llama.cpp's converter writes XLM-R's (tokenizer.ggml.model "t5"): <s> <pad>
// </s> <unk> first, log-probability scores, a precompiled charsmap with a few
// of NFKC's rules in SentencePiece's binary layout, plus one token of every
// other type (user-defined, unused, byte) to pin down how each is treated.
#include <array>
#include <cmath>

#include "gen_encoder.h"
#include "tern/tokenizer/charsmap.h"

namespace tern {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁

// Word-initial pieces ("▁" prepended) and pieces without it.
constexpr std::array kWords = {
    "the",     "of",      "and",    "is",    "an",      "in",       "to",     "it",
    "What",    "capital", "France", "Paris", "largest", "city",     "Berlin", "Germany",
    "borders", "west",    "quick",  "brown", "fox",     "jumps",    "over",   "lazy",
    "dog",     "Re",      "rank",   "score", "query",   "against",  "each",   "document",
    "cross",   "encoder", "reads",  "both",  "at",      "once",     "emoji",  "numbers",
    "one",     "line",    "café",   "un",    "play",    "playable", "fine",   "flow",
    "office",  "中文",    "東京",   "Tokyo", "12",      "TM",       "...",
};
constexpr std::array kPieces = {
    "ing", "ed", "er",  "ly",  "es", "ies", "able", "tion", "ers",  "est", "ge", "fi",
    "fl",  "ff", "ffi", "ice", "ow", "ine", "ank",  "ore",  "ment", "12",  "45", "345",
    "é",   "ü",  "ö",   "ï",   "Å",  "中",  "文",   "東",   "京",   "カ",  "ガ", "ア",
};

}  // namespace

GenUgmVocab make_ugm_vocab() {
  GenUgmVocab v;
  auto add = [&](std::string t, float score, int32_t type) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(score);
    v.types.push_back(type);
    return int32_t(v.tokens.size() - 1);
  };
  v.bos = add("<s>", 0.0f, 3);
  v.pad = add("<pad>", 0.0f, 3);
  v.eos = add("</s>", 0.0f, 3);
  v.unk = add("<unk>", 0.0f, 2);
  add(std::string(kSpace), -3.5f, 1);
  for (int c = 0x21; c < 0x7F; ++c) {  // every printable ASCII character, alone and word-initial
    add(std::string(1, char(c)), -9.0f - 0.01f * float(c - 0x21), 1);
    add(std::string(kSpace) + char(c), -8.5f - 0.01f * float(c - 0x21), 1);
  }
  for (size_t i = 0; i < kWords.size(); ++i)
    add(std::string(kSpace) + kWords[i], -4.0f - 0.07f * float(i % 11), 1);
  for (size_t i = 0; i < kPieces.size(); ++i) add(kPieces[i], -5.0f - 0.05f * float(i % 13), 1);
  add("<usr>", 0.0f, 4);        // user-defined: kept whole wherever it is spelled
  add("[PAD7]", -10000.0f, 5);  // unused (the converter's filler): still matchable
  add("<0xE2>", 0.0f, 6);       // byte: never matched, llama.cpp's UGM has no byte fallback
  v.mask = add("<mask>", 0.0f, 3);

  // NFKC's cases: full-width ASCII, spaces and controls, ligatures, a
  // combining sequence composed, half-width katakana (one with its voicing
  // mark, a key that extends another), compatibility symbols.
  std::vector<std::pair<std::string, std::string>> rules;
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s.push_back(char(cp));
    } else if (cp < 0x800) {
      s += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    } else {
      s += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    }
    return s;
  };
  for (uint32_t cp = 0xFF01; cp <= 0xFF5E; ++cp) rules.emplace_back(utf8(cp), utf8(cp - 0xFEE0));
  for (uint32_t cp : {0x3000u, 0x00A0u, 0x2003u}) rules.emplace_back(utf8(cp), " ");
  for (char c : {'\t', '\n', '\r'}) rules.emplace_back(std::string(1, c), " ");
  rules.emplace_back(utf8(0xFB00), "ff");
  rules.emplace_back(utf8(0xFB01), "fi");
  rules.emplace_back(utf8(0xFB02), "fl");
  rules.emplace_back(utf8(0xFB03), "ffi");
  rules.emplace_back("e" + utf8(0x301), utf8(0xE9));              // e + combining acute -> é
  rules.emplace_back("u" + utf8(0x308), utf8(0xFC));              // u + diaeresis -> ü
  rules.emplace_back(utf8(0x212B), utf8(0xC5));                   // Angstrom sign -> Å
  rules.emplace_back(utf8(0xFF76), utf8(0x30AB));                 // ｶ -> カ
  rules.emplace_back(utf8(0xFF76) + utf8(0xFF9E), utf8(0x30AC));  // ｶﾞ -> ガ
  rules.emplace_back(utf8(0xFF71), utf8(0x30A2));                 // ｱ -> ア
  rules.emplace_back(utf8(0x2026), "...");
  rules.emplace_back(utf8(0x2460), "1");  // ① -> 1
  rules.emplace_back(utf8(0x2122), "TM");
  v.charsmap = Charsmap::build(rules);
  return v;
}

}  // namespace tern
