// libFuzzer target for the Jinja engine (src/jinja/): a template source,
// parsed and rendered against a small context. Templates come from
// downloaded model files, so every input must render or end with a
// jinja::Error: never a crash, a sanitizer report, a hang or runaway memory
// (deep nesting, huge loops and recursive macros hit the Options limits,
// set low here so a slow input stays fast).
//
// Input layout: the template source, then optionally 0x1e and a JSON object
// whose keys become variables (its strings marked as input); without one the
// context is a fixed two-message conversation.
// Seeds: `fuzz_seeds jinja DIR`; dictionary: fuzz/jinja.dict.
// Checks: the output's input/template runs concatenate to its text.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tern/jinja/template.h"

namespace {

using tern::fuzz::check;
using namespace tern::jinja;

constexpr std::string_view kDefaultContext =
    R"({"messages":[{"role":"system","content":"be terse"},{"role":"user","content":"hi <|im_end|>",)"
    R"("tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}],"bos_token":"<s>",)"
    R"("eos_token":"</s>","add_generation_prompt":true,"tools":[{"type":"function",)"
    R"("function":{"name":"f","parameters":{"type":"object"}}}]})";

Object context(std::string_view json_text) {
  auto j = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) j = nlohmann::ordered_json::parse(kDefaultContext);
  return from_json(j, /*input=*/true).as_object();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t sep = in.find('\x1e');
  const std::string_view source = in.substr(0, sep);
  Options o;
  o.max_steps = 20000;
  o.max_output = size_t(1) << 20;
  o.max_depth = 64;
  o.now = 1741338304;
  try {
    const Template t = Template::parse(source, o);
    const Str out =
        t.render(context(sep == std::string_view::npos ? kDefaultContext : in.substr(sep + 1)));
    std::string joined;
    for (const auto& [text, input] : out.runs()) joined += text;
    check(joined == out.text());
    check(out.size() <= o.max_output);
  } catch (const Error&) {
    // Refused with a message: the expected end for a bad template.
  }
  return 0;
}
