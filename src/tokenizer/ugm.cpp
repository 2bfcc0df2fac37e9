// Unigram (llama.cpp's "t5" vocabulary, LLAMA_VOCAB_TYPE_UGM; XLM-RoBERTa,
// T5), as llama.cpp runs it:
//   1. Normalise: at each input position a user-defined token's spelling is
//      kept as is; else the precompiled charsmap's longest matching key is
//      replaced (charsmap.h); else one UTF-8 character is kept (an invalid
//      byte becomes U+FFFD). Spaces in the result become "▁"; with
//      remove_extra_whitespaces every run of spaces collapses into the "▁"
//      before the next word (leading and trailing ones vanish); with
//      add_space_prefix the text gains a leading "▁" (a trailing one with
//      treat_whitespace_as_suffix).
//   2. Viterbi: the segmentation with the highest sum of token scores, over
//      normal, user-defined (score 0) and unused tokens; a character no token
//      covers costs the unknown token's score, the lowest normal score minus
//      10. Ties keep the first segmentation found. Runs of unknown tokens
//      collapse into one.
// There is no byte fallback: llama.cpp never matches byte tokens here.
#include <algorithm>
#include <cfloat>

#include "tern/tokenizer/unicode.h"
#include "vocab.h"

namespace tern::detail {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581
constexpr float kUnknownPenalty = 10.0f;

// The length of the UTF-8 character at s[0] as llama.cpp's strict decoder
// reads it (0: invalid lead byte or missing continuation bytes).
size_t utf8_char_len(std::string_view s) {
  const auto lead = uint8_t(s[0]);
  size_t n = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0)
    n = 2;
  else if ((lead & 0xF0) == 0xE0)
    n = 3;
  else if ((lead & 0xF8) == 0xF0)
    n = 4;
  else
    return 0;
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((uint8_t(s[i]) & 0xC0) != 0x80) return 0;
  return n;
}

bool matchable(const Vocab& v, int32_t id) {
  return v.attr[id] & (kAttrNormal | kAttrUserDefined | kAttrUnused);
}

// Step 1 for one position: the bytes to append and how many input bytes they stand for.
std::pair<std::string_view, size_t> normalize_prefix(const Vocab& v, std::string_view in) {
  const size_t longest = std::min(in.size(), size_t(v.ugm_max_user_len));
  for (size_t n = longest; n > 0; --n) {
    const int32_t id = v.find(in.substr(0, n));
    if (id >= 0 && (v.attr[id] & kAttrUserDefined)) return {in.substr(0, n), n};
  }
  const Charsmap::Match m = v.charsmap.longest_prefix(in);
  if (m.consumed > 0) return {m.replacement, m.consumed};
  const size_t n = utf8_char_len(in);
  if (n == 0) return {"\xEF\xBF\xBD", 1};
  return {in.substr(0, n), n};
}

std::string normalize(const Vocab& v, std::string_view text) {
  const std::string_view space = v.escape_whitespaces ? kEscapedSpace : " ";
  const bool prepend = !v.treat_whitespace_as_suffix && v.add_space_prefix;
  const bool append = v.treat_whitespace_as_suffix && v.add_space_prefix;
  const bool merge = v.remove_extra_whitespaces;
  std::string out;
  out.reserve(text.size() * 3);
  bool prepended = false, in_word = false;
  for (size_t at = 0; at < text.size();) {
    const auto [piece, consumed] = normalize_prefix(v, text.substr(at));
    for (char c : piece) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend && !prepended) || merge) {
            out += space;
            prepended = true;
          }
        }
        out.push_back(c);
      } else {
        in_word = false;
        if (!merge) out += space;
      }
    }
    at += consumed;
  }
  if (append) out += space;
  return out;
}

struct Best {
  int32_t token;
  size_t from;  // where the token starts
  double score;
};

}  // namespace

void ugm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  const std::string s = normalize(v, text);
  const size_t n = s.size();
  if (n == 0) return;
  std::vector<Best> best(n + 1, {v.unk, 0, -DBL_MAX});
  best[0] = {v.unk, 0, 0.0};
  for (size_t at = 0; at < n;) {
    const size_t char_len = std::min(unicode::utf8_len(uint8_t(s[at])), n - at);
    const double base = best[at].score;
    bool char_covered = false;
    const size_t longest = std::min(n - at, size_t(v.max_token_len));
    for (size_t len = 1; len <= longest; ++len) {
      const int32_t id = v.find(std::string_view(s).substr(at, len));
      if (id < 0 || !matchable(v, id)) continue;
      char_covered = char_covered || len == char_len;
      const double score = base + ((v.attr[id] & kAttrUserDefined) ? 0.0 : double(v.score[id]));
      if (score > best[at + len].score) best[at + len] = {id, at, score};
    }
    if (!char_covered) {
      const double score = base + double(v.ugm_unknown_score);
      if (score > best[at + char_len].score) best[at + char_len] = {v.unk, at, score};
    }
    at += char_len;
  }
  // Back from the end; consecutive unknowns become one.
  const size_t first = out.size();
  bool prev_unknown = false;
  for (size_t at = n;;) {
    const Best& b = best[at];
    const bool unknown = b.token == v.unk;
    if (!(prev_unknown && unknown) && b.token >= 0) out.push_back(b.token);
    if (b.from == 0) break;
    prev_unknown = unknown;
    at = b.from;
  }
  std::reverse(out.begin() + std::ptrdiff_t(first), out.end());
}

void ugm_prepare(Vocab& v) {
  float lo = FLT_MAX;  // in float, as llama.cpp computes it
  for (int32_t id = 0; id < v.n_tokens(); ++id)
    if (v.attr[id] & kAttrNormal) lo = std::min(lo, v.score[id]);
  v.ugm_unknown_score = lo - kUnknownPenalty;
  for (int32_t id = 0; id < v.n_tokens(); ++id)
    if (v.attr[id] & kAttrUserDefined)
      v.ugm_max_user_len = std::max(v.ugm_max_user_len, int(v.text[id].size()));
}

}  // namespace tern::detail
