#pragma once
// The one answer pipeline: the model's text stream decoded into typed events,
// whatever API the request came from.
//
//   text pieces --AnswerDecoder--> AnswerEvents --AnswerRenderer--> wire format
//                                       |
//                                       +--Answer (accumulated: non-streaming bodies)
//
// The decoder splits a reasoning model's thinking from its answer
// (ReasoningSplitter), then tool calls from the answer's text
// (ToolCallParser), and ends with the finish. Every API shape (OpenAI chat and
// completions, Responses, Anthropic Messages, the WebSocket protocol) renders
// these events; a non-streaming body is rendered from their accumulation, so
// streaming and non-streaming answers are decoded by the same code. Nothing
// here knows about HTTP or JSON.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/sampling/reasoning_split.h"
#include "tern/sampling/tool_calls.h"
#include "tern/sched/stream.h"

namespace tern::server {

struct AnswerEvent {
  enum class Kind : uint8_t {
    Reasoning,      // text: thinking, in order
    Content,        // text: the answer's text, in order
    CallStart,      // call, name: a tool call is being written (streamed arguments only)
    CallArguments,  // call, text: the next fragment of its arguments' JSON (streamed only)
    Call,           // call, name, text: a finished call with its whole arguments
    End,            // finish, calls: the answer is over
  };
  Kind kind = Kind::Content;
  std::string text;
  std::string name;
  size_t call = 0;  // the call's index in the answer (0, 1, ...)
  // End only: how the generation ended, and how many calls the answer made.
  sched::Finish finish;
  size_t calls = 0;
};

struct AnswerOptions {
  // Thinking is split out (a reasoning model's chat output); in_reasoning:
  // the prompt ended with the open tag, so the output starts inside it.
  bool split_reasoning = false;
  bool in_reasoning = false;
  // Tool calls are parsed out of the answer in this syntax (nullopt: none).
  std::optional<ToolCallSyntax> tools;
  // Calls are also reported while written (CallStart, CallArguments), for
  // APIs that stream a call's arguments. A streamed call that turns out not
  // to be well-formed JSON is kept as written (its name is already out);
  // without streaming it is given back as content.
  bool stream_arguments = false;
};

class AnswerDecoder {
 public:
  explicit AnswerDecoder(const AnswerOptions& o);

  // The events for the next piece of output. Text that may still turn into
  // a tag is held back until it is decided, so no event is ever taken back.
  std::vector<AnswerEvent> push(std::string_view text);
  // The end of the output: what was held back (dropped when the generation
  // failed: an error ends the answer where it stands), then End.
  std::vector<AnswerEvent> finish(const sched::Finish& f);

  size_t calls() const { return calls_; }

 private:
  void answer_text(std::string_view text, std::vector<AnswerEvent>& out);
  void tool_parts(ToolCallParser::Parts p, std::vector<AnswerEvent>& out);

  std::optional<ReasoningSplitter> split_;
  std::optional<ToolCallParser> tools_;
  size_t calls_ = 0;
};

// A whole answer: the accumulation of its events.
struct Answer {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;

  void add(const AnswerEvent& e);
  void add(std::span<const AnswerEvent> events) {
    for (const AnswerEvent& e : events) add(e);
  }
};

// A finished output at once (calls whole: stream_arguments does not apply).
Answer decode_answer(std::string_view text, AnswerOptions o);

}  // namespace tern::server
