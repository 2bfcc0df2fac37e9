#pragma once
// Tool calls in a model's output, independent of any API: the JSON Schema a
// forced call must satisfy (for JsonConstraint), and an incremental parser
// that splits generated text into content and calls.
//
// A call is written in one of these syntaxes (ToolCallSyntax, read off the
// model's chat template):
//   tagged  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Hermes / Qwen /
//           SmolLM2, Granite, and the generic fallback); several calls may follow each other.
//   bare    {"name": "f", "parameters": {...}}   (Llama 3.x): the whole reply is one JSON object.
//   list    [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]   (Mistral Nemo): the
//           calls as one JSON list after the opening tag (closing tag optional).
//   named   [TOOL_CALLS]f[ARGS]{...}   (Mistral Small 3.2, Devstral), <function=f>{...}</function>
//           (functionary), <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (DeepSeek):
//           the name, a separator, the arguments' JSON; the calls may sit inside a wrapper
//           (wrap_open ... wrap_close, written once around them), dropped from the content.
//   xml     <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n
//           </tool_call> (Qwen3-Coder), <tool_call>f<arg_key>city</arg_key><arg_value>Paris
//           </arg_value></tool_call> (GLM): the name, then each argument between markers.
// Nothing here knows about HTTP or tokens.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

struct ToolSpec {
  std::string name;
  std::string description;
  std::string parameters = "{\"type\":\"object\",\"properties\":{}}";  // JSON Schema text
  bool strict = false;
};

struct ToolCallSyntax {
  enum class Form : uint8_t { Object, List, Named, Xml };
  std::string open = "<tool_call>";    // empty: the bare syntax (Object only)
  std::string close = "</tool_call>";  // may be empty for List and Named (the output's end)
  std::string args_key = "arguments";  // Llama 3: "parameters"
  Form form = Form::Object;
  std::string name_sep;               // Named: between the name and the arguments
  std::string wrap_open, wrap_close;  // Named, Xml: around all the calls (may be empty)
  // Xml: each argument as key_open KEY key_close VALUE value_close after the
  // name (and name_sep); values are text (JSON when they parse as a number,
  // boolean, null, list or object). These markers match with the spaces and
  // newlines around them ignored.
  std::string key_open, key_close, value_close;

  bool tagged() const { return !open.empty(); }
  // The frame a forced call is decoded in (JsonConstraint::Frame's texts).
  std::string frame_open() const { return tagged() ? open + "\n" : std::string(); }
  std::string frame_close() const { return tagged() ? "\n" + close : std::string(); }
};

// The JSON Schema of one call to any of `tools`: an object {"name": <one of
// the names>, <args_key>: <that tool's parameters>} (anyOf over the tools).
// Throws SchemaError (json_schema.h) when a tool's parameters are not JSON.
std::string tool_call_schema(std::span<const ToolSpec> tools, std::string_view args_key);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // compact JSON text (an object)
};

// Splits streamed text into content and calls. Text that may be the start of
// the opening tag is held back until it is decided, so a call never leaks into
// content; a call whose body is not a JSON object with a "name" is given back
// as content, tags included. Whitespace right after a call is dropped.
class ToolCallParser {
 public:
  // stream_arguments: also report each call while it is written (deltas), its
  // name as soon as it is known and its arguments in fragments as they come
  // (tagged syntax, name first; other calls arrive whole as one delta).
  explicit ToolCallParser(ToolCallSyntax syntax, bool stream_arguments = false)
      : syntax_(std::move(syntax)), stream_(stream_arguments) {}

  // A piece of call `index`: `name` is set on its first delta only.
  struct CallDelta {
    size_t index = 0;
    std::string name;
    std::string arguments;  // the next fragment of the arguments' JSON text
  };
  struct Parts {
    std::string content;
    std::vector<ParsedToolCall> calls;  // completed calls
    std::vector<CallDelta> deltas;      // stream_arguments only
  };
  Parts push(std::string_view text);
  // The end of the output: whatever was held back.
  Parts flush();
  size_t calls_seen() const { return calls_seen_; }

  // One call's body ({"name": ..., "arguments"|"parameters": ...}); false if it is not one.
  static bool parse_call(std::string_view body, ParsedToolCall& out);

 private:
  void emit_content(std::string_view s, Parts& out);
  void push_tagged(Parts& out);
  // A call's body (between open and close) by the syntax's form: its calls
  // into `calls`; false if it is not one.
  bool parse_body(std::string_view body, std::vector<ParsedToolCall>& calls) const;
  bool parse_xml_call(std::string_view body, std::vector<ParsedToolCall>& calls) const;
  // Where the call starting buf_ ends (its close, or with no close the next
  // open), npos while unknown.
  size_t call_end() const;
  void add_call(ParsedToolCall c, Parts& out);
  void stream_open_call(Parts& out);
  void finish_streamed_call(std::string_view body, Parts& out);

  ToolCallSyntax syntax_;
  std::string buf_;  // held back: a possible opening tag, or an unfinished call
  enum class State { Start, Text, Call, Bare } state_ = State::Start;
  bool after_call_ = false;
  size_t calls_seen_ = 0;
  bool stream_ = false;
  // The call being streamed: its arguments start at args_at_ in buf_, and
  // buf_[args_at_, args_sent_) has been reported (0: its name is not out yet).
  size_t args_at_ = 0, args_sent_ = 0;
  std::string streamed_name_;
};

}  // namespace tern
