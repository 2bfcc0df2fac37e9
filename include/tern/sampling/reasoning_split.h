#pragma once
// Splits a model's streamed output into its reasoning and its answer.
//
// Reasoning models (Qwen 3, DeepSeek R1 and their distillations) write their
// thinking between "<think>" and "</think>" before the answer. Clients read it
// from a separate field (OpenAI-style servers: `reasoning_content`), so the
// text is split as it streams:
//
//   - output that starts (after optional whitespace) with the open tag is
//     reasoning until the close tag; what follows is the answer;
//   - when the prompt already ended with the open tag (templates that force
//     thinking), the output starts inside the reasoning;
//   - output that does not start with the open tag is all answer;
//   - a reasoning that never closes (max_tokens reached) stays reasoning.
//
// Whitespace right after either tag and right before the close tag is
// dropped (the tags sit on their own lines). Text that could still grow into
// a tag, or into the whitespace before one, is held back, so nothing shown is
// ever taken back. The tags themselves are never emitted.
#include <string>
#include <string_view>

namespace tern {

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool start_in_reasoning = false, std::string open = "<think>",
                             std::string close = "</think>");

  struct Parts {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
  };

  // Appends a piece of output; returns what can be shown now.
  Parts push(std::string_view text);
  // At the end of the output: everything still held back.
  Parts flush();

  // The whole output at once (push then flush).
  static Parts split(std::string_view text, bool start_in_reasoning = false);

 private:
  enum class State { Start, Reasoning, Content };
  void run(Parts& out, bool at_end);

  std::string open_, close_;
  State state_;
  bool skip_ws_;         // drop whitespace at the start of the current part
  std::string pending_;  // text not yet classified or held back
};

}  // namespace tern
