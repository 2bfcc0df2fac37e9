#pragma once
// Text <-> token ids for the vocabularies GGUF models carry:
//   "gpt2"  byte-level BPE (merges by rank) with a pre-tokenizer chosen by
//           tokenizer.ggml.pre (see pre_tokenizer.h);
//   "llama" SentencePiece-style: token scores, "▁" for spaces, <0xXX> byte
//           fallback, optional leading space (tokenizer.ggml.add_space_prefix);
//   "bert"  WordPiece (BERT-family encoders): lowercasing and accent
//           stripping as the file says, greedy longest match per word, the
//           text wrapped in [CLS] ... [SEP] (wpm.cpp);
//   "t5"    unigram (XLM-RoBERTa, T5): the precompiled charsmap's
//           normalisation, then the best-scoring segmentation (ugm.cpp);
//           EOS appended by default.
// Behaviour follows llama.cpp's llama_tokenize / llama_token_to_piece /
// llama_detokenize, which the golden test compares against.
//
// A Tokenizer is immutable after construction and cheap to copy (shared data);
// every method is safe to call from several threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

namespace gguf {
class GgufFile;
}

namespace detail {
struct Vocab;
}

// Raw tokenizer metadata, as a GGUF file stores it under tokenizer.ggml.*.
// Tokenizer::from_gguf fills one of these; tests can build one directly.
struct VocabSpec {
  std::string model;                 // tokenizer.ggml.model: "gpt2", "llama", "bert" or "t5"
  std::string pre;                   // tokenizer.ggml.pre; empty = not given
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, index = id
  std::vector<float> scores;         // tokenizer.ggml.scores; empty = all 0
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type; empty = all normal
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right" by rank (gpt2)
  std::optional<int32_t> bos, eos, eot, eom, unk, pad;  // tokenizer.ggml.*_token_id
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  // WordPiece: tokenizer.ggml.seperator_token_id (sic), and
  // tokenizer.ggml.normalizer.lowercase / .strip_accents.
  std::optional<int32_t> sep;
  std::optional<bool> lowercase, strip_accents;
  // Unigram: tokenizer.ggml.precompiled_charsmap (raw bytes; empty = none)
  // and tokenizer.ggml.remove_extra_whitespaces.
  std::string precompiled_charsmap;
  std::optional<bool> remove_extra_whitespaces;
};

// A run of text to encode. Only where parse_special is set are the spellings
// of control tokens recognised (a chat template's own markers); elsewhere
// (message content, user text) they stay literal characters.
struct TextSegment {
  std::string text;
  bool parse_special = false;
};

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// How a byte-level BPE ("gpt2") vocabulary spells these bytes: GPT-2's
// bytes_to_unicode map (printable Latin-1 as itself, other bytes from U+0100),
// as UTF-8. For writing vocabularies (test and scripted models).
std::string byte_level_spelling(std::string_view bytes);

class Tokenizer {
 public:
  // Reads tokenizer.ggml.*; throws FormatError naming the file and what is
  // missing or malformed (no vocabulary, unknown model or pre-tokenizer, ...).
  static Tokenizer from_gguf(const gguf::GgufFile& f);
  // Same from already-read metadata; `source` names it in error messages.
  static Tokenizer from_spec(const VocabSpec& spec, std::string_view source = "vocab");

  // add_bos: add the tokens the vocabulary asks for (BOS when
  //   tokenizer.ggml.add_bos_token, EOS when tokenizer.ggml.add_eos_token),
  //   like llama.cpp's add_special.
  // parse_special: recognise the spellings of control tokens in the text.
  //   User-defined tokens are always recognised, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // Encodes the concatenated segments as ONE text in which a control token's
  // spelling is recognised only when it lies wholly inside parse_special
  // segments. Raw text is not cut at segment boundaries (BPE merges and the
  // SentencePiece space prefix see the joined text), so when no other segment
  // spells a control token the ids equal encode(joined, add_bos, true).
  std::vector<int32_t> encode(std::span<const TextSegment> segments, bool add_bos) const;

  // The bytes of one token; control/unknown tokens give "" unless render_special.
  // May be an incomplete UTF-8 sequence (byte tokens). Out-of-range ids give "".
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  // Concatenated pieces, like llama_detokenize(remove_special=false,
  // unparse_special=render_special): for SentencePiece vocabularies the leading
  // space of the first piece is dropped; for BPE vocabularies whose
  // pre-tokenizer asks for it, spaces before . , ! ? and some contractions are
  // removed. The result is raw bytes (not necessarily valid UTF-8).
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 if none
  int32_t eos() const;  // -1 if none
  int32_t eot() const;  // -1 if none
  int32_t unk() const;  // -1 if none
  bool is_eog(int32_t id)
      const;  // ends generation: eos, eot, <|im_end|>, <|endoftext|>, <end_of_turn>, ...
  std::vector<int32_t> eog_ids() const;  // sorted
  bool add_bos_default()
      const;  // tokenizer.ggml.add_bos_token (or the model/pre-tokenizer default)
  bool add_eos_default() const;  // tokenizer.ggml.add_eos_token (or the model default)
  bool is_control(int32_t id) const;
  TokenType token_type(int32_t id) const;                        // kUndefined for out-of-range ids
  std::optional<int32_t> token_id(std::string_view text) const;  // exact vocabulary lookup
  const std::string& token_text(
      int32_t id) const;  // the vocabulary spelling; throws InvalidArgument if out of range

  std::string_view model() const;          // tokenizer.ggml.model: "gpt2", "llama", "bert", "t5"
  std::string_view pre_tokenizer() const;  // e.g. "smollm"; "" for "llama"

 private:
  explicit Tokenizer(std::shared_ptr<const detail::Vocab> vocab) : vocab_(std::move(vocab)) {}
  std::shared_ptr<const detail::Vocab> vocab_;
};

}  // namespace tern
