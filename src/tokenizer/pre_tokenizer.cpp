// Hand-written scanners for the pre-tokenizer regexes (see pre_tokenizer.h).
//
// The text is decoded to codepoints once; every stage of a regex chain turns a
// list of spans [begin, end) into a finer list. As in llama.cpp, a stage only
// looks inside one span at a time, and the parts of a span a regex does not
// match stay as spans of their own.
#include "tern/tokenizer/pre_tokenizer.h"

#include <array>
#include <cstdint>

#include "tern/tokenizer/unicode.h"

namespace tern {
namespace {

using unicode::flags;

struct Span {
  size_t begin;
  size_t end;
};
using Spans = std::vector<Span>;
using Cps = std::vector<uint32_t>;

constexpr uint16_t kLNW = unicode::kLetter | unicode::kNumber | unicode::kWhitespace;

// Cursor over one span: codepoints and flags outside it read as 0 ("no match"),
// which mirrors the out-of-range handling of the reference scanners.
class Scanner {
 public:
  Scanner(const Cps& cps, Span span, Spans& out)
      : cps_(cps), end_(span.end), prev_(span.begin), out_(out) {}

  uint32_t cp(size_t pos) const { return pos < end_ ? cps_[pos] : 0xFFFFFFFFu; }
  uint16_t fl(size_t pos) const { return pos < end_ ? flags(cps_[pos]) : 0; }
  bool in(size_t pos) const { return pos < end_; }
  size_t end() const { return end_; }

  // Emits the word from the previous cut up to `end`.
  void cut(size_t end) {
    if (end > prev_) out_.push_back({prev_, end});
    prev_ = end;
  }

 private:
  const Cps& cps_;
  size_t end_;
  size_t prev_;
  Spans& out_;
};

uint32_t ascii_lower(uint32_t c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

// 's|'t|'re|'ve|'m|'ll|'d at pos; returns the match length or 0.
size_t contraction_len(const Scanner& s, size_t pos, bool ignore_case) {
  if (s.cp(pos) != '\'' || !s.in(pos + 1)) return 0;
  const auto low = [&](size_t p) { return ignore_case ? ascii_lower(s.cp(p)) : s.cp(p); };
  const uint32_t a = low(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (!s.in(pos + 2)) return 0;
  const uint32_t b = low(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at pos (pos is whitespace or not: no whitespace -> one codepoint).
size_t whitespace_end(const Scanner& s, size_t pos) {
  size_t n = 0;
  while (s.fl(pos + n) & unicode::kWhitespace) ++n;
  if (n > 1 && s.in(pos + n)) return pos + n - 1;  // leave the last space to the next word
  if (n > 0) return pos + n;
  return pos + 1;  // no alternative matched: a word of one codepoint
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Cps& cps, Span span, Spans& out) {
  Scanner s(cps, span, out);
  size_t pos = span.begin;
  while (pos < s.end()) {
    const uint32_t c = s.cp(pos);
    if (size_t n = contraction_len(s, pos, /*ignore_case=*/false)) {
      pos += n;
      s.cut(pos);
      continue;
    }
    const uint16_t f2 = c == ' ' ? s.fl(pos + 1) : s.fl(pos);
    const uint16_t run_class = (f2 & unicode::kLetter)   ? unicode::kLetter
                               : (f2 & unicode::kNumber) ? unicode::kNumber
                                                         : 0;
    if (run_class != 0) {
      pos += (c == ' ');
      while (s.fl(pos) & run_class) ++pos;
      s.cut(pos);
      continue;
    }
    if (!(f2 & kLNW) && f2 != 0) {
      pos += (c == ' ');
      while (!(s.fl(pos) & kLNW) && s.fl(pos) != 0) ++pos;
      s.cut(pos);
      continue;
    }
    pos = whitespace_end(s, pos);
    s.cut(pos);
  }
}

// Llama-3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const Cps& cps, Span span, size_t max_digits, Spans& out) {
  Scanner s(cps, span, out);
  size_t pos = span.begin;
  const auto is_crlf = [](uint32_t c) { return c == '\r' || c == '\n'; };
  while (pos < s.end()) {
    const uint32_t c = s.cp(pos);
    const uint16_t f = s.fl(pos);
    if (size_t n = contraction_len(s, pos, /*ignore_case=*/true)) {
      pos += n;
      s.cut(pos);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_crlf(c) && !(f & unicode::kNumber) &&
        ((f & unicode::kLetter) || (s.fl(pos + 1) & unicode::kLetter))) {
      ++pos;
      while (s.fl(pos) & unicode::kLetter) ++pos;
      s.cut(pos);
      continue;
    }
    // \p{N}{1,max}
    if (f & unicode::kNumber) {
      size_t run = 0;
      while (s.fl(pos) & unicode::kNumber) {
        ++pos;
        if (++run == max_digits) {
          s.cut(pos);
          run = 0;
        }
      }
      s.cut(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const uint16_t f2 = c == ' ' ? s.fl(pos + 1) : f;
    if (!(f2 & kLNW) && f != 0) {
      pos += (c == ' ');
      while (!(s.fl(pos) & kLNW) && s.fl(pos) != 0) ++pos;
      while (is_crlf(s.cp(pos))) ++pos;
      s.cut(pos);
      continue;
    }
    // \s*[\r\n]+ : up to the last CR/LF of the whitespace run
    size_t n = 0;
    size_t last_crlf_end = 0;
    while (s.fl(pos + n) & unicode::kWhitespace) {
      if (is_crlf(s.cp(pos + n))) last_crlf_end = pos + n + 1;
      ++n;
    }
    pos = last_crlf_end > 0 ? last_crlf_end : whitespace_end(s, pos);
    s.cut(pos);
  }
}

// Applies a stage to every span of the previous stage.
template <typename Fn>
Spans refine(const Spans& in, Fn&& split) {
  Spans out;
  out.reserve(in.size() + in.size() / 2);
  for (const Span& span : in) split(span, out);
  return out;
}

// Each codepoint matching pred becomes a word; the runs between them stay whole.
template <typename Pred>
void split_each(const Cps& cps, Span span, Pred pred, Spans& out) {
  size_t prev = span.begin;
  for (size_t i = span.begin; i < span.end; ++i) {
    if (!pred(cps[i])) continue;
    if (i > prev) out.push_back({prev, i});
    out.push_back({i, i + 1});
    prev = i + 1;
  }
  if (span.end > prev) out.push_back({prev, span.end});
}

// Maximal runs of codepoints matching pred become words; so do the gaps.
template <typename Pred>
void split_runs(const Cps& cps, Span span, Pred pred, Spans& out) {
  size_t i = span.begin;
  while (i < span.end) {
    const bool match = pred(cps[i]);
    size_t j = i + 1;
    while (j < span.end && pred(cps[j]) == match) ++j;
    out.push_back({i, j});
    i = j;
  }
}

// [0-9][0-9][0-9]: leftmost non-overlapping triples of ASCII digits.
void split_ascii_triples(const Cps& cps, Span span, Spans& out) {
  const auto digit = [&](size_t i) { return i < span.end && cps[i] >= '0' && cps[i] <= '9'; };
  size_t prev = span.begin;
  size_t i = span.begin;
  while (i < span.end) {
    if (digit(i) && digit(i + 1) && digit(i + 2)) {
      if (i > prev) out.push_back({prev, i});
      out.push_back({i, i + 3});
      i += 3;
      prev = i;
    } else {
      ++i;
    }
  }
  if (span.end > prev) out.push_back({prev, span.end});
}

bool is_default_punct(uint32_t c) {
  switch (c) {
    case '$':
    case '+':
    case '<':
    case '=':
    case '>':
    case '^':
    case '~':
    case '|':
      return true;
    default:
      return flags(c) & unicode::kPunctuation;
  }
}

Spans split_spans(PreTokenizerKind kind, const Cps& cps) {
  Spans spans;
  if (!cps.empty()) spans.push_back({0, cps.size()});
  const auto gpt2 = [&](Span sp, Spans& out) { split_gpt2(cps, sp, out); };
  const auto is_num = [](uint32_t c) { return (flags(c) & unicode::kNumber) != 0; };
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return refine(spans, gpt2);
    case PreTokenizerKind::kSmolLM:
      spans = refine(spans, [&](Span sp, Spans& out) { split_each(cps, sp, is_num, out); });
      return refine(spans, gpt2);
    case PreTokenizerKind::kLlama3:
      return refine(spans, [&](Span sp, Spans& out) { split_llama3(cps, sp, 3, out); });
    case PreTokenizerKind::kQwen2:
      return refine(spans, [&](Span sp, Spans& out) { split_llama3(cps, sp, 1, out); });
    case PreTokenizerKind::kDefault:
      spans =
          refine(spans, [&](Span sp, Spans& out) { split_runs(cps, sp, is_default_punct, out); });
      spans = refine(spans, gpt2);
      spans = refine(spans, [&](Span sp, Spans& out) { split_runs(cps, sp, is_num, out); });
      return refine(spans, [&](Span sp, Spans& out) { split_ascii_triples(cps, sp, out); });
  }
  return spans;
}

struct NamedConfig {
  std::string_view name;
  PreTokenizerConfig config;
};

constexpr PreTokenizerKind kD = PreTokenizerKind::kDefault;
constexpr PreTokenizerKind kG = PreTokenizerKind::kGpt2;
constexpr PreTokenizerKind kS = PreTokenizerKind::kSmolLM;
constexpr PreTokenizerKind kL = PreTokenizerKind::kLlama3;
constexpr PreTokenizerKind kQ = PreTokenizerKind::kQwen2;

// {name, {kind, clean_spaces, ignore_merges, add_bos}} as in llama.cpp's vocab loader.
// clang-format off
constexpr std::array<NamedConfig, 25> kNamedConfigs = {{
    {"default", {kD, true, false, false}},
    {"gpt-2", {kG, true, false, false}},
    {"gpt2", {kG, true, false, false}},
    {"phi-2", {kG, true, false, false}},
    {"mpt", {kG, true, false, false}},
    {"olmo", {kG, true, false, false}},
    {"smollm", {kS, false, false, false}},
    {"starcoder", {kS, true, false, false}},
    {"refact", {kS, true, false, false}},
    {"command-r", {kS, false, false, false}},
    {"codeshell", {kS, true, false, false}},
    {"exaone", {kS, true, false, false}},
    {"minerva-7b", {kS, true, false, false}},
    {"llama3", {kL, true, true, true}},
    {"llama-v3", {kL, true, true, true}},
    {"llama-bpe", {kL, true, true, true}},
    {"falcon3", {kL, true, true, true}},
    {"pixtral", {kL, true, true, true}},
    {"dbrx", {kL, true, false, false}},
    {"smaug-bpe", {kL, true, false, false}},
    {"qwen2", {kQ, false, false, false}},
    {"deepseek-r1-qwen", {kQ, false, false, false}},
    {"megrez", {kQ, true, false, false}},
    {"stablelm2", {kQ, true, false, false}},
    {"hunyuan", {kQ, false, false, false}},
}};
// clang-format on

}  // namespace

std::optional<PreTokenizerConfig> pre_tokenizer_by_name(std::string_view name) {
  for (const auto& entry : kNamedConfigs) {
    if (entry.name == name) return entry.config;
  }
  return std::nullopt;
}

std::string_view pre_tokenizer_name(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kDefault:
      return "default";
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kSmolLM:
      return "smollm";
    case PreTokenizerKind::kLlama3:
      return "llama3";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
  }
  return "?";
}

std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text) {
  const Cps cps = unicode::decode_utf8_lenient(text);
  const Spans spans = split_spans(kind, cps);
  std::vector<std::string> words;
  words.reserve(spans.size());
  for (const Span& sp : spans) {
    std::string word;
    for (size_t i = sp.begin; i < sp.end; ++i) unicode::append_utf8(word, cps[i]);
    words.push_back(std::move(word));
  }
  return words;
}

}  // namespace tern
