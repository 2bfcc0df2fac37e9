#pragma once
// Private: the immutable vocabulary a Tokenizer shares between its copies.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tern/tokenizer/charsmap.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::detail {

// Per-token attribute bits (llama.cpp's llama_token_attr, the subset tern uses).
enum TokenAttr : uint16_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
};

// Lets unordered_map<std::string, V> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Vocab {
  enum class Type { kBpe, kSpm, kWpm, kUgm };

  Type type = Type::kBpe;
  std::string model;     // "gpt2" / "llama" / "bert" / "t5"
  std::string pre_name;  // tokenizer.ggml.pre as given ("" for llama)
  PreTokenizerConfig pre;

  std::vector<std::string> text;   // id -> vocabulary spelling
  std::vector<float> score;        // id -> score (SPM merge priority)
  std::vector<uint16_t> attr;      // id -> TokenAttr bits
  std::vector<std::string> piece;  // id -> bytes it stands for (control tokens: their text)
  StringMap<int32_t> text_to_id;
  StringMap<int32_t> merge_rank;  // "left right" -> rank (BPE)

  // Control, user-defined and unknown tokens, longest spelling first: the order
  // in which encode() cuts them out of the text.
  std::vector<int32_t> special_tokens;
  std::vector<bool> eog;  // id -> ends generation

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend " " to text that starts a fragment
  // WordPiece ("bert"): the separator closing an encoded text, the
  // normaliser's options and the longest spelling (bytes) a match can have.
  int32_t sep = -1;
  bool lowercase = false;
  bool strip_accents = false;
  int max_token_len = 0;
  // Unigram ("t5"): the normaliser's rules and space handling, the score of
  // a character no token covers and the longest user-defined spelling
  // (ugm_prepare).
  Charsmap charsmap;
  bool remove_extra_whitespaces = false;
  bool treat_whitespace_as_suffix = false;  // llama.cpp reads no key for it: always false
  bool escape_whitespaces = true;
  float ugm_unknown_score = 0.0f;
  int ugm_max_user_len = 0;  // the longest user-defined token's spelling (bytes)

  int32_t n_tokens() const { return static_cast<int32_t>(text.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
  int32_t find(std::string_view s) const {
    const auto it = text_to_id.find(s);
    return it == text_to_id.end() ? -1 : it->second;
  }
};

// Validates metadata and builds the vocabulary (vocab_loader.cpp). Throws
// FormatError "<source>: <what is wrong>".
std::shared_ptr<const Vocab> build_vocab(const VocabSpec& spec, std::string_view source);

// BPE (bpe.cpp): appends the tokens of one text fragment.
void bpe_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);
// The bytes a byte-level BPE token spelling stands for (GPT-2 byte<->unicode map).
std::string bpe_decode_text(std::string_view token_text);

// SentencePiece (spm.cpp): appends the tokens of one text fragment; `text` has
// its spaces already escaped as U+2581.
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// WordPiece (wpm.cpp): appends the tokens of one text fragment (BERT's
// normalisation and word splitting, then greedy longest-match per word).
void wpm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// Unigram (ugm.cpp): appends the tokens of one text fragment (normalised
// here); ugm_prepare fills the vocabulary's derived scores once.
void ugm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);
void ugm_prepare(Vocab& vocab);

}  // namespace tern::detail
