// WordPiece (llama.cpp's "bert" vocabulary, LLAMA_VOCAB_TYPE_WPM), as
// llama.cpp runs it:
//   1. BERT's basic pre-tokenization: drop NUL, U+FFFD and control
//      characters; optionally lowercase and strip accents (each codepoint
//      replaced by the first codepoint of its NFD, then marks dropped);
//      split on whitespace; every punctuation character, ASCII symbol and
//      CJK ideograph is a word by itself.
//   2. Each word, with "▁" (U+2581) prepended, is cut greedily, longest
//      vocabulary match first, from left to right. The GGUF converter
//      stores a word-initial piece "foo" as "▁foo" and a continuation
//      "##foo" as "foo", so the same lookup serves both. A word with a
//      position nothing matches becomes the unknown token, whole.
#include <algorithm>

#include "tern/tokenizer/unicode.h"
#include "vocab.h"

namespace tern::detail {
namespace {

// The CJK ideograph blocks BERT splits character by character (HF's
// _is_chinese_char, with llama.cpp's 0x2B920 for the start of Extension E's
// successor range, as HF's Rust tokenizer has it).
bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Step 1: the words of the text, normalised.
std::vector<std::string> wpm_words(const Vocab& v, std::string_view text) {
  std::vector<std::string> words(1);
  for (uint32_t cp : unicode::decode_utf8_lenient(text)) {
    if (v.strip_accents) cp = unicode::nfd_base(cp);
    const uint16_t f = unicode::flags(cp);
    if (f & unicode::kWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == unicode::kReplacementChar || (f & unicode::kControl)) continue;
    if (v.strip_accents && (f & unicode::kMark)) continue;
    std::string s;
    unicode::append_utf8(s, v.lowercase ? unicode::to_lower(cp) : cp);
    if ((f & unicode::kPunctuation) || (cp < 0x7F && (f & unicode::kSymbol)) || is_cjk(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);  // a word by itself
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  for (const std::string& word : wpm_words(v, text)) {
    const std::string w = "\xE2\x96\x81" + word;
    const int n = int(w.size());
    const size_t start = out.size();
    // Step 2: longest match first at each position (byte offsets, as llama.cpp).
    for (int i = 0; i < n;) {
      int32_t id = -1;
      int j = std::min(n, i + v.max_token_len);
      for (; j > i; --j) {
        id = v.find(std::string_view(w).substr(size_t(i), size_t(j - i)));
        if (id >= 0) break;
      }
      if (id < 0) {  // nothing fits here: the whole word is unknown
        out.resize(start);
        break;
      }
      out.push_back(id);
      i = j;
    }
    if (out.size() == start && v.unk >= 0) out.push_back(v.unk);
  }
}

}  // namespace tern::detail
