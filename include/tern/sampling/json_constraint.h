#pragma once
// Grammar-constrained sampling for one sequence: before each draw, mask()
// sets the logit of every token the grammar cannot accept next to -inf
// (end-of-generation tokens stay only where the output is a complete value);
// after it, accept() advances the matcher by the chosen token's bytes.
// Owned by a Sampler (Sampler::constrain); knows nothing of HTTP.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tern/sampling/json_matcher.h"
#include "tern/sampling/params.h"
#include "tern/sampling/token_trie.h"

namespace tern {

class JsonConstraint {
 public:
  // end_ids: the tokens that end generation (EOS, EOT, ...).
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::vector<int32_t> end_ids);

  // For params.response_format JsonObject / JsonSchema (throws SchemaError on
  // a bad schema); nullptr for Text.
  static std::unique_ptr<JsonConstraint> from_params(const SamplingParams& p,
                                                     std::shared_ptr<const TokenTrie> trie,
                                                     std::vector<int32_t> end_ids);

  // logits: (n_vocab). Leaves at least one token finite: when the grammar has
  // no continuation (cannot happen for a well-formed state) the end tokens.
  void mask(std::span<float> logits);
  // Advances by token's bytes; end tokens and refused tokens change nothing.
  void accept(int32_t token);
  void reset();

  const JsonMatcher& matcher() const { return matcher_; }
  bool complete() const { return matcher_.accepts_end(); }

 private:
  JsonMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_ids_;
  std::vector<uint8_t> allowed_;  // (n_vocab) scratch
  TokenTrie::Scratch scratch_;
};

}  // namespace tern
