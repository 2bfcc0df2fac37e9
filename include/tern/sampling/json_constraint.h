#pragma once
// Grammar-constrained sampling for one sequence: before each draw, mask()
// sets the logit of every token the grammar cannot accept next to -inf
// (end-of-generation tokens stay only where the output is a complete value);
// after it, accept() advances the matcher by the chosen token's bytes.
// Owned by a Sampler (Sampler::constrain); knows nothing of HTTP.
//
// A Frame puts literal text around the value (tool calls: "<tool_call>\n",
// the JSON, "\n</tool_call>") and may allow several framed values in a row,
// each right after the last or after a "\n". While inside the literal text only tokens that spell
// its next bytes are allowed (a token may run on from the opening text into
// the value's first bytes); end tokens are allowed once the last frame closed.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/sampling/json_matcher.h"
#include "tern/sampling/params.h"
#include "tern/sampling/token_trie.h"

namespace tern {

// Literal text around a constrained value (see JsonConstraint).
struct JsonFrame {
  std::string open, close;  // literal text before and after each value
  bool repeat = false;      // one or more framed values
  // Non-empty (a prefix of open): free text until the output writes it; the
  // framed value that follows is constrained, then the text is free again.
  std::string trigger;
};

class JsonConstraint {
 public:
  using Frame = JsonFrame;

  // end_ids: the tokens that end generation (EOS, EOT, ...).
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::vector<int32_t> end_ids, JsonFrame frame = JsonFrame());

  // For params.response_format JsonObject / JsonSchema (throws SchemaError on
  // a bad schema), framed by params.json_open / json_close / json_repeat;
  // nullptr for Text.
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
  // The output so far is complete: a whole value, and its frame closed.
  bool complete() const {
    if (!frame_.trigger.empty()) return phase_ == Phase::Free;
    return framed() ? phase_ == Phase::Done : matcher_.accepts_end();
  }

 private:
  enum class Phase : uint8_t { Free, Open, Value, Close, Done };
  bool framed() const { return !frame_.open.empty() || !frame_.close.empty() || frame_.repeat; }
  // The literal text the state is inside (Open, Close, or Done's separator).
  const std::string& literal() const;
  void mask_literal(std::span<float> logits);
  void enter_value();
  void after_literal();
  void advance_text(std::string_view piece);
  void watch_trigger(std::string_view piece);

  JsonMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_ids_;
  std::vector<uint8_t> allowed_;  // (n_vocab) scratch
  TokenTrie::Scratch scratch_;
  Frame frame_;
  std::string next_open_;  // "\n" + frame_.open: the text before a repeated value
  Phase phase_ = Phase::Value;
  size_t pos_ = 0;          // bytes of literal() already written
  bool separated_ = false;  // this Open began with the "\n" separator
  std::string tail_;        // Free: the output's last bytes, for the trigger
};

}  // namespace tern
