#include "tern/tokenizer/incremental_decoder.h"

#include "tern/tokenizer/unicode.h"

namespace tern {

std::string IncrementalDecoder::push(int32_t id) {
  pending_ += tok_->token_to_piece(id, render_special_);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const unicode::Utf8Step step = unicode::utf8_step(std::string_view(pending_).substr(pos));
    if (step.kind == unicode::Utf8Step::kTruncated) break;  // wait for the next token
    if (step.kind == unicode::Utf8Step::kComplete) {
      out.append(pending_, pos, step.len);
    } else {
      unicode::append_utf8(out, unicode::kReplacementChar);
    }
    pos += step.len;
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out = unicode::sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tern
