// libFuzzer target for the unigram tokenizer's precompiled charsmap
// (tokenizer.ggml.precompiled_charsmap) and the tokenizer over it.
//
// Input: a 2-byte little-endian length n, then n bytes of charsmap blob, then
// the text to tokenize. Every blob must either parse or be rejected with
// tern::FormatError; on a parsed one every longest-prefix lookup stays inside
// the text, and a small unigram vocabulary with that charsmap encodes the text
// (special tokens added or parsed) into valid ids and decodes them. Seeds:
// `fuzz_seeds ugm DIR` (charsmaps from Charsmap::build with NFKC-style rules,
// and texts). Run with scripts/fuzz.sh ugm.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tern/core/error.h"
#include "tern/tokenizer/charsmap.h"
#include "tern/tokenizer/tokenizer.h"

namespace {

using tern::fuzz::check;

tern::VocabSpec base_spec() {
  tern::VocabSpec s;
  s.model = "t5";
  const std::string sp = "\xE2\x96\x81";
  s.tokens = {"<s>", "<pad>", "</s>", "<unk>", sp,    sp + "a",
              "a",   "b",     "ab",   "<u>",   "[X]", "<0x41>"};
  s.scores = {0, 0, 0, 0, -2, -3, -4, -4, -3, 0, -100, 0};
  s.token_types = {3, 3, 3, 2, 1, 1, 1, 1, 1, 4, 5, 6};
  s.bos = 0;
  s.eos = 2;
  s.unk = 3;
  s.add_bos = true;
  s.add_space_prefix = true;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t n = std::min<size_t>(size - 2, size_t(data[0]) | size_t(data[1]) << 8);
  const std::string_view blob(reinterpret_cast<const char*>(data + 2), n);
  const std::string_view text(reinterpret_cast<const char*>(data + 2 + n), size - 2 - n);
  tern::Charsmap map;
  try {
    map = tern::Charsmap::parse(blob, "tokenizer.ggml.precompiled_charsmap");
  } catch (const tern::FormatError&) {
    return 0;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const tern::Charsmap::Match m = map.longest_prefix(text.substr(i));
    check(m.consumed <= text.size() - i);
    check(m.consumed > 0 || m.replacement.empty());
  }
  for (bool merge : {false, true}) {
    tern::VocabSpec s = base_spec();
    s.precompiled_charsmap = std::string(blob);
    s.remove_extra_whitespaces = merge;
    const tern::Tokenizer t = tern::Tokenizer::from_spec(s, "fuzz");
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = t.encode(text, !special, special);
      for (int32_t id : ids) check(id >= 0 && id < t.n_vocab());
      (void)t.decode(ids, special);
    }
  }
  return 0;
}
