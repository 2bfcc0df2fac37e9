#pragma once
// Streaming detokenizer: turns generated token ids into text pieces that are
// always valid UTF-8. A multi-byte character split across tokens (byte-level
// BPE splits emoji and CJK into byte tokens) is held back until it completes;
// bytes that can never become valid UTF-8 come out as U+FFFD at once.
//
// Pieces are token_to_piece() per token: the concatenation of push()/flush()
// results equals Tokenizer::decode() of the same ids whenever that decode is
// valid UTF-8 and the vocabulary does no detokenize clean-up (SentencePiece's
// first-space strip, or the clean_spaces rules of some BPE pre-tokenizers).
#include <cstdint>
#include <string>

#include "tern/tokenizer/tokenizer.h"

namespace tern {

class IncrementalDecoder {
 public:
  // `tok` must outlive the decoder.
  explicit IncrementalDecoder(const Tokenizer& tok, bool render_special = false)
      : tok_(&tok), render_special_(render_special) {}

  // Appends the token's bytes; returns the text completed by it (may be empty).
  std::string push(int32_t id);
  // Returns whatever is still held back, a truncated sequence as U+FFFD, and resets.
  std::string flush();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool render_special_;
  std::string pending_;
};

}  // namespace tern
