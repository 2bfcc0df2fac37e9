#include "tern/sampling/json_constraint.h"

#include <algorithm>
#include <limits>

namespace tern {

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar,
                               std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_ids)
    : matcher_(std::move(grammar)),
      trie_(std::move(trie)),
      end_ids_(std::move(end_ids)),
      allowed_(size_t(trie_->n_vocab())) {}

std::unique_ptr<JsonConstraint> JsonConstraint::from_params(const SamplingParams& p,
                                                            std::shared_ptr<const TokenTrie> trie,
                                                            std::vector<int32_t> end_ids) {
  switch (p.response_format) {
    case ResponseFormat::Text:
      return nullptr;
    case ResponseFormat::JsonObject:
      return std::make_unique<JsonConstraint>(JsonGrammar::any_object(), std::move(trie),
                                              std::move(end_ids));
    case ResponseFormat::JsonSchema:
      return std::make_unique<JsonConstraint>(JsonGrammar::from_schema(p.json_schema),
                                              std::move(trie), std::move(end_ids));
  }
  return nullptr;
}

void JsonConstraint::mask(std::span<float> logits) {
  const size_t n_allowed = trie_->allowed(matcher_, allowed_, scratch_);
  const bool end = matcher_.accepts_end() || n_allowed == 0;
  for (int32_t id : end_ids_)
    if (id >= 0 && size_t(id) < allowed_.size()) allowed_[size_t(id)] = end;
  // Ids past the tokenizer's vocabulary (a model's padded rows) never match.
  for (size_t i = 0; i < logits.size(); ++i)
    if (i >= allowed_.size() || !allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

void JsonConstraint::accept(int32_t token) {
  if (token < 0 || token >= trie_->n_vocab()) return;
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) return;
  matcher_.advance(trie_->piece(token));
}

void JsonConstraint::reset() {
  matcher_.reset();
}

}  // namespace tern
