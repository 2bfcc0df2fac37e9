// libFuzzer target for the chat-template renderer (tokenizer/chat_template.cpp
// and chat_tools.cpp): template recognition from a Jinja source, then the
// rendering of messages, tool calls and tool definitions into prompt text.
//
// Input layout (fields separated by 0x1e; within a field, 0x1f separates
// sub-fields): byte 0 holds flags (bit 0: add_generation_prompt), then the
// template source, then one field per item, its first byte saying what:
//   's' 'u' 'a' 't'  a system / user / assistant / tool message (the content)
//   'r'              a message with any role: role 0x1f content
//   'c'              a tool call on the last message: name 0x1f arguments
//   'T'              a tool: name 0x1f description 0x1f parameters (JSON)
// Seeds: `fuzz_seeds chat_template DIR`; dictionary: fuzz/chat_template.dict.
// Every input must render or be refused with InvalidArgument; segments()
// must concatenate to apply()'s text.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tern/core/error.h"
#include "tern/tokenizer/chat_template.h"

namespace {

using tern::ChatMessage;
using tern::ChatTool;
using tern::fuzz::check;

std::string sub(const std::vector<std::string_view>& parts, size_t i) {
  return i < parts.size() ? std::string(parts[i]) : std::string();
}

struct Conversation {
  std::vector<ChatMessage> msgs;
  std::vector<ChatTool> tools;
};

void add_item(std::string_view field, Conversation& c) {
  if (field.empty()) return;
  const std::string_view body = field.substr(1);
  const auto parts = tern::fuzz::split(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(body.data()), body.size()), '\x1f');
  switch (field[0]) {
    case 's':
      c.msgs.push_back({"system", std::string(body)});
      break;
    case 'u':
      c.msgs.push_back({"user", std::string(body)});
      break;
    case 'a':
      c.msgs.push_back({"assistant", std::string(body)});
      break;
    case 't':
      c.msgs.push_back({"tool", std::string(body)});
      break;
    case 'r':
      c.msgs.push_back({sub(parts, 0), sub(parts, 1)});
      break;
    case 'c':
      if (!c.msgs.empty()) c.msgs.back().tool_calls.push_back({sub(parts, 0), sub(parts, 1)});
      break;
    case 'T':
      c.tools.push_back({sub(parts, 0), sub(parts, 1), sub(parts, 2)});
      break;
    default:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool add_generation_prompt = data[0] & 1;
  const auto fields = tern::fuzz::split(std::span<const uint8_t>(data + 1, size - 1), '\x1e');
  const tern::ChatTemplate tmpl = tern::ChatTemplate::from_string(fields[0]);
  Conversation c;
  for (size_t i = 1; i < fields.size(); ++i) add_item(fields[i], c);
  try {
    const std::string text = tmpl.apply(c.msgs, add_generation_prompt, c.tools);
    std::string joined;
    for (const tern::TextSegment& s : tmpl.segments(c.msgs, add_generation_prompt, c.tools))
      joined += s.text;
    check(joined == text);
    volatile size_t n = tmpl.tool_format().open.size() + tmpl.name().size();
    (void)n;
  } catch (const tern::InvalidArgument&) {
    // A role or order the template cannot express: refused cleanly.
  }
  return 0;
}
