#include "tern/sampling/json_constraint.h"

#include <algorithm>
#include <limits>

namespace tern {

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar,
                               std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_ids,
                               Frame frame)
    : matcher_(std::move(grammar)),
      trie_(std::move(trie)),
      end_ids_(std::move(end_ids)),
      allowed_(size_t(trie_->n_vocab())),
      frame_(std::move(frame)),
      next_open_("\n" + frame_.open) {
  reset();
}

std::unique_ptr<JsonConstraint> JsonConstraint::from_params(const SamplingParams& p,
                                                            std::shared_ptr<const TokenTrie> trie,
                                                            std::vector<int32_t> end_ids) {
  Frame frame{p.json_open, p.json_close, p.json_repeat, p.json_trigger};
  switch (p.response_format) {
    case ResponseFormat::Text:
      return nullptr;
    case ResponseFormat::JsonObject:
      return std::make_unique<JsonConstraint>(JsonGrammar::any_object(), std::move(trie),
                                              std::move(end_ids), std::move(frame));
    case ResponseFormat::JsonSchema:
      return std::make_unique<JsonConstraint>(JsonGrammar::from_schema(p.json_schema),
                                              std::move(trie), std::move(end_ids),
                                              std::move(frame));
  }
  return nullptr;
}

const std::string& JsonConstraint::literal() const {
  if (phase_ == Phase::Close) return frame_.close;
  if (phase_ == Phase::Open && !separated_) return frame_.open;
  return next_open_;
}

void JsonConstraint::mask(std::span<float> logits) {
  if (phase_ == Phase::Free) return;
  if (phase_ != Phase::Value) {
    mask_literal(logits);
    return;
  }
  const size_t n_allowed = trie_->allowed(matcher_, allowed_, scratch_);
  const bool end = (!framed() && matcher_.accepts_end()) || n_allowed == 0;
  for (int32_t id : end_ids_)
    if (id >= 0 && size_t(id) < allowed_.size()) allowed_[size_t(id)] = end;
  // Ids past the tokenizer's vocabulary (a model's padded rows) never match.
  for (size_t i = 0; i < logits.size(); ++i)
    if (i >= allowed_.size() || !allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

// Inside literal text: tokens that spell its next bytes; from the opening
// text, also tokens that finish it and start the value. Once done, the end
// tokens and, with repeat, the opening text of another value, either right
// away or after the "\n" separator; a token that is only the separator is
// refused there, so a model that would merely end its line ends the reply.
void JsonConstraint::mask_literal(std::span<float> logits) {
  std::fill(allowed_.begin(), allowed_.end(), uint8_t(0));
  const bool done = phase_ == Phase::Done;
  size_t n_allowed = 0;
  auto allow = [&](std::string_view rest, bool opening, size_t min_len) {
    for (int32_t id = 0; id < trie_->n_vocab(); ++id) {
      const std::string& piece = trie_->piece(id);
      if (piece.size() < std::max<size_t>(min_len, 1) || allowed_[size_t(id)]) continue;
      bool ok = rest.starts_with(piece);
      if (!ok && opening && std::string_view(piece).starts_with(rest)) {
        JsonMatcher m = matcher_;  // reset: the value has not begun
        ok = m.advance(std::string_view(piece).substr(rest.size()));
      }
      if (ok) {
        allowed_[size_t(id)] = 1;
        ++n_allowed;
      }
    }
  };
  if (!done) {
    allow(std::string_view(literal()).substr(pos_), phase_ == Phase::Open, 1);
  } else if (frame_.repeat) {
    allow(frame_.open, true, 1);
    allow(next_open_, true, 2);
  }
  for (int32_t id : end_ids_)
    if (id >= 0 && size_t(id) < allowed_.size()) allowed_[size_t(id)] = done || n_allowed == 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (i >= allowed_.size() || !allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

void JsonConstraint::enter_value() {
  phase_ = Phase::Value;
  pos_ = 0;
  matcher_.reset();
}

// The literal text is written out: Open leads into the value, Close into Done.
void JsonConstraint::after_literal() {
  if (phase_ == Phase::Close) {
    phase_ = frame_.trigger.empty() ? Phase::Done : Phase::Free;
    pos_ = 0;
    return;
  }
  enter_value();
}

void JsonConstraint::accept(int32_t token) {
  if (token < 0 || token >= trie_->n_vocab()) return;
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) return;
  if (phase_ == Phase::Free) {
    watch_trigger(trie_->piece(token));
    return;
  }
  advance_text(trie_->piece(token));
}

// Free text: once the trigger is written, the frame's opening text is that far
// along and the bytes after the trigger continue it.
void JsonConstraint::watch_trigger(std::string_view piece) {
  tail_.append(piece);
  const size_t at = tail_.find(frame_.trigger);
  if (at == std::string::npos) {
    const size_t keep = frame_.trigger.size() - 1;
    if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
    return;
  }
  const std::string rest = tail_.substr(at + frame_.trigger.size());
  tail_.clear();
  matcher_.reset();
  separated_ = false;
  phase_ = Phase::Open;
  pos_ = frame_.trigger.size();
  if (pos_ == frame_.open.size()) enter_value();
  // Byte by byte: the text came unmasked, so it may run past the value.
  for (size_t i = 0; i < rest.size() && phase_ != Phase::Free; ++i)
    advance_text(std::string_view(rest).substr(i, 1));
}

void JsonConstraint::advance_text(std::string_view piece) {
  if (phase_ == Phase::Done) {
    if (!frame_.repeat) return;
    phase_ = Phase::Open;  // another value, after the separator or not
    pos_ = 0;
    separated_ = piece.starts_with('\n') && !frame_.open.starts_with('\n');
  }
  if (phase_ == Phase::Open || phase_ == Phase::Close) {
    const std::string_view rest = std::string_view(literal()).substr(pos_);
    if (piece.size() < rest.size()) {
      pos_ += piece.size();
      return;
    }
    const bool opening = phase_ == Phase::Open;
    after_literal();
    if (!opening || piece.size() == rest.size()) return;
    piece.remove_prefix(rest.size());
  }
  matcher_.advance(piece);
  if (framed() && matcher_.accepts_end()) {
    phase_ = Phase::Close;
    pos_ = 0;
    if (frame_.close.empty()) after_literal();
  }
}

void JsonConstraint::reset() {
  matcher_.reset();
  separated_ = false;
  pos_ = 0;
  tail_.clear();
  if (!frame_.trigger.empty()) {
    phase_ = Phase::Free;
    return;
  }
  phase_ = framed() && !frame_.open.empty() ? Phase::Open : Phase::Value;
}

}  // namespace tern
