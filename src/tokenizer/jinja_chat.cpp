// A chat template run by the Jinja engine (see jinja_chat.h).
//
// The conversation is given to the template in the shape llama.cpp's server
// gives it, so one set of messages makes the same prompt in both:
//   {"role", "content" (a string, "" when empty), "reasoning_content"?,
//    "tool_call_id"?, "tool_calls"?: [{"type": "function",
//    "function": {"name", "arguments"}, "id"?}]}
// with the variables messages, bos_token, eos_token, enable_thinking (true
// unless chat_template_kwargs says otherwise), tools (when offered),
// datetime and date_string (today), add_generation_prompt (only when set),
// and chat_template_kwargs on top.
#include "jinja_chat.h"

#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "chat_tools.h"
#include "tern/core/error.h"
#include "tern/core/json_scan.h"
#include "tern/jinja/value.h"

namespace tern::chat_jinja {
namespace {

using json = nlohmann::ordered_json;

// Probe texts: what reaches the output tells what the template does with a
// field (none of them can occur in a real template).
constexpr std::string_view kSystemMark = "SYSTEM_PROBE_7c1d";
constexpr std::string_view kStringMark = "STRING_PROBE_7c1d";
constexpr std::string_view kTypedMark = "TYPED_PROBE_7c1d";
constexpr std::string_view kArgMark = "ARG_PROBE_7c1d";
constexpr std::string_view kCallMark = "CALL_PROBE_7c1d";
constexpr std::string_view kToolMark = "TOOL_PROBE_7c1d";
// The arguments of a probe call written as markup (two, to tell the markers apart).
constexpr std::string_view kArgKey = "ARGKEY_PROBE", kArgValue = "ARGVAL_PROBE";
constexpr std::string_view kArgKey2 = "XKEY_PROBE", kArgValue2 = "XVAL_PROBE";

std::string format_day(std::time_t t, const char* fmt, bool utc) {
  std::tm tm{};
  if (utc) {
    gmtime_r(&t, &tm);
  } else {
    localtime_r(&t, &tm);
  }
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, fmt, &tm));
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\n\r\f\v");
  return std::string(s.substr(b, e - b + 1));
}

// Whether the template knows a thinking mode (then enable_thinking defaults
// to true, as llama.cpp's server has it for templates it finds reasoning
// markers in; a template that only switches a line of text, like Apertus'
// "Deliberation: enabled", is left off).
bool knows_thinking(std::string_view src) {
  for (std::string_view mark : {"reasoning_content", "think>", "[THINK]", "<|channel"})
    if (src.find(mark) != std::string_view::npos) return true;
  return false;
}

json tool_json(const ChatTool& t) {
  json params = json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
  if (params.is_discarded()) params = json::object();
  return json{
      {"type", "function"},
      {"function", json{{"name", t.name}, {"description", t.description}, {"parameters", params}}}};
}

// One message as llama.cpp's common_chat_msg::to_json_oaicompat writes it.
json message_json(const ChatMessage& m) {
  json j = {{"role", m.role}, {"content", m.content}};
  if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const ChatToolCall& c : m.tool_calls) {
      json call = {{"type", "function"},
                   {"function", json{{"name", c.name}, {"arguments", c.arguments}}}};
      if (!c.id.empty()) call["id"] = c.id;
      calls.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

// The reshaping llama.cpp applies before rendering, from what the template
// takes (its workarounds in common/chat.cpp).
json polyfill(json messages, const Caps& caps, std::string_view source) {
  // StepFun's template: surrounding whitespace in a message sends its model
  // into reasoning loops, so llama.cpp trims every text first.
  if (source.find("You have access to the following functions in JSONSchema format") !=
      std::string_view::npos) {
    for (json& m : messages)
      for (const char* k : {"content", "reasoning_content"})
        if (m.contains(k) && m[k].is_string()) m[k] = trim(m[k].get<std::string>());
  }
  // "developer" is the system role, except to gpt-oss (its template knows both).
  if (source.find("<|channel|>") == std::string_view::npos)
    for (json& m : messages)
      if (m["role"] == "developer") m["role"] = "system";
  // A template with no system role: the first system message joins the next
  // message's text (or is dropped when it is the only one).
  if (!caps.system_role && !messages.empty() && messages.front()["role"] == "system") {
    if (messages.size() > 1) {
      messages[1]["content"] = messages[0]["content"].get<std::string>() + "\n" +
                               messages[1]["content"].get<std::string>();
    }
    messages.erase(messages.begin());
  }
  // Families whose templates read an earlier answer's thinking elsewhere
  // (llama.cpp's handlers for them move it the same way).
  const bool gpt_oss = source.find("<|channel|>") != std::string_view::npos;
  const bool lfm2 = source.find("<|tool_list_start|>") != std::string_view::npos ||
                    source.find("List of tools: [") != std::string_view::npos;
  const bool ministral3 = source.find("[SYSTEM_PROMPT]") != std::string_view::npos &&
                          source.find("[TOOL_CALLS]") != std::string_view::npos &&
                          source.find("[ARGS]") != std::string_view::npos &&
                          source.find("[CALL_ID]") == std::string_view::npos;
  for (json& m : messages) {
    const bool thought = m.contains("reasoning_content");
    if ((gpt_oss || lfm2) && thought) {
      m["thinking"] = m["reasoning_content"];
      if (gpt_oss && m.contains("tool_calls")) m.erase("content");
    }
    if (ministral3 && (m["role"] == "system" || m["role"] == "assistant")) {
      // Content as blocks: the thinking first, then the text.
      json blocks = json::array();
      if (thought)
        blocks.push_back(json{{"type", "thinking"}, {"thinking", m["reasoning_content"]}});
      blocks.push_back(json{{"type", "text"}, {"text", m["content"]}});
      m["content"] = std::move(blocks);
      m.erase("reasoning_content");
    }
    if (caps.object_arguments && m.contains("tool_calls")) {
      for (json& c : m["tool_calls"]) {
        json& args = c["function"]["arguments"];
        json parsed = json::parse(args.get<std::string>(), nullptr, false);
        if (parsed.is_discarded())
          throw InvalidArgument("a tool call's arguments are not valid JSON: " +
                                args.get<std::string>());
        args = std::move(parsed);
      }
    }
    if (!caps.string_content && caps.typed_content && m.contains("content") &&
        m["content"].is_string()) {
      const std::string text = m["content"].get<std::string>();
      m["content"] = json::array({json{{"type", "text"}, {"text", text}}});
    }
  }
  return messages;
}

struct Probe {
  bool ok = false;
  std::string out;
};

// Renders a probe conversation; a template that raises is an answer too.
Probe try_render(const jinja::Template& t, const ChatTokens& tok, const json& messages,
                 const json* tools) {
  jinja::Object ctx;
  ctx.set("messages", jinja::from_json(messages, true));
  ctx.set("bos_token", jinja::Value(tok.bos));
  ctx.set("eos_token", jinja::Value(tok.eos));
  ctx.set("enable_thinking", jinja::Value(true));
  if (tools) ctx.set("tools", jinja::from_json(*tools, true));
  ctx.set("add_generation_prompt", jinja::Value(true));
  try {
    return {true, t.render(ctx).text()};
  } catch (const InvalidArgument&) {
    return {};
  }
}

bool contains(const Probe& p, std::string_view mark) {
  return p.ok && p.out.find(mark) != std::string::npos;
}

json probe_tool() {
  json params = {{"type", "object"},
                 {"properties", json{{"arg", json{{"type", "string"}}}}},
                 {"required", json::array({"arg"})}};
  return json::array(
      {json{{"type", "function"},
            {"function",
             json{{"name", kToolMark}, {"description", "Probe tool"}, {"parameters", params}}}}});
}

json probe_call(const json& args) {
  return json::array(
      {json{{"role", "user"}, {"content", "Call it."}},
       json{{"role", "assistant"},
            {"content", ""},
            {"tool_calls",
             json::array({json{{"type", "function"},
                               {"function", json{{"name", kCallMark}, {"arguments", args}}},
                               {"id", "call00001"}}})}},
       json{{"role", "tool"}, {"content", "Done."}, {"tool_call_id", "call00001"}},
       json{{"role", "assistant"}, {"content", "It is done."}},
       json{{"role", "user"}, {"content", "Thanks."}}});
}

Caps probe(const jinja::Template& t, const ChatTokens& tok) {
  Caps c;
  const Probe plain =
      try_render(t, tok, json::array({json{{"role", "user"}, {"content", kStringMark}}}), nullptr);
  if (!contains(plain, kStringMark)) {
    const json typed = json::array({json{{"type", "text"}, {"text", kTypedMark}}});
    const Probe parts =
        try_render(t, tok, json::array({json{{"role", "user"}, {"content", typed}}}), nullptr);
    if (contains(parts, kTypedMark)) {
      c.string_content = false;
      c.typed_content = true;
    }
  }
  const Probe sys = try_render(t, tok,
                               json::array({json{{"role", "system"}, {"content", kSystemMark}},
                                            json{{"role", "user"}, {"content", "Hello."}}}),
                               nullptr);
  c.system_role = contains(sys, kSystemMark);
  const json tools = probe_tool();
  const Probe as_object = try_render(t, tok, probe_call(json{{"arg", kArgMark}}), &tools);
  // A dict printed as Python prints it is a template that wanted the text.
  const std::string py_repr = "'arg': '" + std::string(kArgMark) + "'";
  c.object_arguments =
      contains(as_object, kArgMark) && as_object.out.find(py_repr) == std::string::npos;
  const Probe call =
      c.object_arguments
          ? as_object
          : try_render(t, tok, probe_call("{\"arg\": \"" + std::string(kArgMark) + "\"}"), &tools);
  c.tool_calls = contains(call, kCallMark);
  c.tools = contains(call, kToolMark);
  return c;
}

// Where the JSON object or list starting at s[from] ends (one past it),
// npos if it does not parse there; `value` is what it parses to.
size_t json_end(std::string_view s, size_t from, json* value) {
  const size_t end = json_container_end(s, from);
  if (end == std::string_view::npos) return end;
  *value = json::parse(s.substr(from, end - from), nullptr, false);
  return value->is_discarded() ? std::string_view::npos : end;
}

// One call as the template wrote it in a render: where its name is, the
// text before it (from the turn's header), its arguments' JSON, and the
// text after it to the turn's end.
struct WrittenCall {
  ChatToolFormat::Form form = ChatToolFormat::Form::Object;
  size_t begin = 0, end = 0;  // the call's JSON (Object, List) or name + sep + JSON (Named)
  std::string args_key, name_sep;
  std::string key_open, key_close, value_close;  // Xml
};

// The call named `name` in `text` (arguments `args`, as object or JSON text).
std::optional<WrittenCall> find_call(std::string_view text, std::string_view name, const json& args,
                                     size_t from) {
  const size_t name_at = text.find(name, from);
  if (name_at == std::string_view::npos) return std::nullopt;
  const auto args_of = [&](const json& obj) -> std::string {
    if (!obj.is_object() || obj.size() < 2 || obj.value("name", "") != name) return {};
    for (const auto& [k, v] : obj.items())
      if (k != "name" && (v == args || v == json(args.dump()))) return k;
    return {};
  };
  WrittenCall w;
  // Inside a JSON object {"name": ..., "<key>": ...}, maybe inside a list.
  const size_t brace = text.rfind('{', name_at);
  if (brace != std::string_view::npos && brace >= from) {
    json obj;
    const size_t end = json_end(text, brace, &obj);
    if (end != std::string_view::npos && end > name_at && !(w.args_key = args_of(obj)).empty()) {
      size_t b = brace;
      while (b > from && (text[b - 1] == ' ' || text[b - 1] == '\n')) --b;
      if (b > from && text[b - 1] == '[') {
        json list;
        const size_t lend = json_end(text, b - 1, &list);
        if (lend == std::string_view::npos || !list.is_array()) return std::nullopt;
        w.form = ChatToolFormat::Form::List;
        w.begin = b - 1;
        w.end = lend;
        return w;
      }
      w.begin = brace;
      w.end = end;
      return w;
    }
  }
  // The name outside the JSON: name, a separator, the arguments object.
  const size_t name_end = name_at + name.size();
  for (size_t b = text.find('{', name_end); b != std::string_view::npos && b < name_end + 64;
       b = text.find('{', b + 1)) {
    json obj;
    const size_t end = json_end(text, b, &obj);
    if (end == std::string_view::npos || obj != args) continue;
    w.form = ChatToolFormat::Form::Named;
    w.name_sep = std::string(text.substr(name_end, b - name_end));
    if (w.name_sep.find_first_of("\"{}") != std::string::npos) return std::nullopt;
    w.begin = name_at;
    w.end = end;
    return w;
  }
  return std::nullopt;
}

std::string_view marker_suffix(std::string_view a, std::string_view b);

// The call named `name` with the two probe arguments written as markup
// (Xml): name, [name_sep], key_open KEY key_close VALUE value_close, twice.
std::optional<WrittenCall> find_xml_call(std::string_view text, std::string_view name,
                                         size_t from) {
  const size_t name_at = text.find(name, from);
  if (name_at == std::string_view::npos) return std::nullopt;
  const size_t name_end = name_at + name.size();
  size_t pos[4];
  size_t at = name_end;
  const std::string_view marks[4] = {kArgKey, kArgValue, kArgKey2, kArgValue2};
  for (int i = 0; i < 4; ++i) {
    pos[i] = text.find(marks[i], at);
    if (pos[i] == std::string_view::npos) return std::nullopt;
    at = pos[i] + marks[i].size();
  }
  const std::string_view pre = text.substr(name_end, pos[0] - name_end);
  const size_t v1_end = pos[1] + kArgValue.size();
  const std::string_view mid = text.substr(v1_end, pos[2] - v1_end);
  const std::string_view key_open = marker_suffix(pre, mid);
  if (key_open.empty()) return std::nullopt;
  WrittenCall w;
  w.form = ChatToolFormat::Form::Xml;
  w.name_sep = trim(pre.substr(0, pre.size() - key_open.size()));
  w.key_open = std::string(key_open);
  w.value_close = trim(mid.substr(0, mid.size() - key_open.size()));
  const size_t k1_end = pos[0] + kArgKey.size(), k2_end = pos[2] + kArgKey2.size();
  w.key_close = trim(text.substr(k1_end, pos[1] - k1_end));
  if (w.key_close.empty() || w.value_close.empty() ||
      trim(text.substr(k2_end, pos[3] - k2_end)) != w.key_close)
    return std::nullopt;
  const size_t v2_end = pos[3] + kArgValue2.size();
  const size_t vc = text.find(w.value_close, v2_end);
  if (vc == std::string_view::npos || !trim(text.substr(v2_end, vc - v2_end)).empty())
    return std::nullopt;
  w.begin = name_at;
  w.end = vc + w.value_close.size();
  return w;
}

// The longest common suffix of a and b that starts at a marker ('<' or '['),
// and the longest common prefix that ends at one ('>' or ']').
std::string_view marker_suffix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[a.size() - 1 - n] == b[b.size() - 1 - n]) ++n;
  std::string_view s = a.substr(a.size() - n);
  const size_t m = s.find_first_of("<[");
  return m == std::string_view::npos ? std::string_view() : s.substr(m);
}
std::string_view marker_prefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  std::string_view s = a.substr(0, n);
  const size_t m = s.find_last_of(">]");
  return m == std::string_view::npos ? std::string_view() : s.substr(0, m + 1);
}

// How the template writes a call in an assistant turn, read off renders:
// the turn with probe text, with one probe call, and with two. Found when the
// call is one JSON object {"name": ..., "<args key>": {...}} between an
// opening and a closing tag or alone in the turn (Hermes' <tool_call>,
// Llama 3's bare JSON), a JSON list of them after a tag (Mistral Nemo), or
// the name, a separator and the arguments' JSON (Mistral's [TOOL_CALLS]f[ARGS],
// functionary, DeepSeek; with two calls the part written once around them
// is the wrapper). Anything else (XML parameters, a call index in the
// separator, channels): none.
std::optional<ChatToolFormat> call_format(const jinja::Template& t, const ChatTokens& tok,
                                          const Caps& caps) {
  constexpr std::string_view kText = "CONTENT_PROBE_7c1d";
  constexpr std::string_view kCall2 = "SECOND_PROBE_7c1d";
  const json user = {{"role", "user"}, {"content", "Call it."}};
  json args = json{{kArgKey, kArgValue}};
  const auto call = [&](std::string_view name, const char* id) {
    return json{{"type", "function"},
                {"function", json{{"name", name},
                                  {"arguments", caps.object_arguments ? args : json(args.dump())}}},
                {"id", id}};
  };
  const auto turn = [&](json calls) {
    return json::array(
        {user, json{{"role", "assistant"}, {"content", ""}, {"tool_calls", std::move(calls)}}});
  };
  const auto render = [&](const json& msgs) -> std::optional<std::string> {
    jinja::Object ctx;
    ctx.set("messages", jinja::from_json(msgs, true));
    ctx.set("bos_token", jinja::Value(tok.bos));
    ctx.set("eos_token", jinja::Value(tok.eos));
    try {
      return t.render(ctx).text();
    } catch (const InvalidArgument&) {
      return std::nullopt;
    }
  };
  const std::optional<std::string> a =
      render(json::array({user, json{{"role", "assistant"}, {"content", kText}}}));
  std::optional<std::string> b = render(turn(json::array({call(kCallMark, "call00001")})));
  if (!a || !b) return std::nullopt;
  const size_t at = a->find(kText);
  if (at == std::string::npos) return std::nullopt;
  // The turn's header is what both renders share before the text.
  size_t head = 0;
  while (head < at && head < b->size() && (*a)[head] == (*b)[head]) ++head;
  const std::string_view turn_end = std::string_view(*a).substr(at + kText.size());
  // The JSON forms first; failing those, markup with two arguments.
  bool xml = false;
  const auto find = [&](std::string_view text, std::string_view name, size_t from) {
    return xml ? find_xml_call(text, name, from) : find_call(text, name, args, from);
  };
  std::optional<WrittenCall> w = find(*b, kCallMark, head);
  if (!w) {
    xml = true;
    args = json{{kArgKey, kArgValue}, {kArgKey2, kArgValue2}};
    b = render(turn(json::array({call(kCallMark, "call00001")})));
    if (!b) return std::nullopt;
    head = std::min(head, b->size());
    w = find(*b, kCallMark, head);
  }
  if (!w) return std::nullopt;
  std::string_view rest = std::string_view(*b).substr(w->end);
  if (!rest.ends_with(turn_end)) return std::nullopt;
  rest.remove_suffix(turn_end.size());
  ChatToolFormat f;
  f.form = w->form;
  f.args_key = w->args_key.empty() ? "arguments" : w->args_key;
  f.name_sep = w->name_sep;
  f.key_open = w->key_open;
  f.key_close = w->key_close;
  f.value_close = w->value_close;
  f.open = trim(std::string_view(*b).substr(head, w->begin - head));
  f.close = trim(rest);
  if (f.form == ChatToolFormat::Form::Object && f.open.empty() != f.close.empty())
    return std::nullopt;  // a tag needs both ends
  if (f.form != ChatToolFormat::Form::Object && f.open.empty()) return std::nullopt;
  if (f.form == ChatToolFormat::Form::Xml && f.close.empty()) return std::nullopt;
  if (f.form != ChatToolFormat::Form::Named && f.form != ChatToolFormat::Form::Xml) return f;
  // Two calls: the text between them is a call's end and the next one's
  // start; what the single call has beyond those is the wrapper.
  const std::optional<std::string> c =
      render(turn(json::array({call(kCallMark, "call00001"), call(kCall2, "call00002")})));
  if (!c) return f;
  const std::optional<WrittenCall> w1 = find(*c, kCallMark, head);
  const std::optional<WrittenCall> w2 = w1 ? find(*c, kCall2, w1->end) : std::nullopt;
  if (!w2 || w2->name_sep != w1->name_sep) return std::nullopt;  // e.g. a call index inside
  const std::string_view between = std::string_view(*c).substr(w1->end, w2->begin - w1->end);
  const std::string_view unit_open = marker_suffix(f.open, trim(between));
  const std::string_view unit_close = marker_prefix(f.close, trim(between));
  if (unit_open.empty()) return std::nullopt;
  f.wrap_open = trim(std::string_view(f.open).substr(0, f.open.size() - unit_open.size()));
  // The wrapper's end: its first marker (the template may write the turn's
  // own end after it).
  std::string wrap_close = trim(std::string_view(f.close).substr(unit_close.size()));
  if (const size_t m = wrap_close.find_first_of(">]"); m != std::string::npos)
    wrap_close.resize(m + 1);
  f.wrap_close = std::move(wrap_close);
  f.open = std::string(unit_open);
  f.close = std::string(unit_close);
  return f;
}

jinja::Options options(std::time_t now) {
  jinja::Options o;
  o.now = now;
  return o;
}

}  // namespace

Renderer::Renderer(std::string_view source, ChatTokens tokens, std::time_t now)
    : source_(source),
      tokens_(std::move(tokens)),
      now_(now),
      tmpl_(jinja::Template::parse(source, options(now))) {
  caps_ = probe(tmpl_, tokens_);
  if (caps_.tool_calls) caps_.call_format = call_format(tmpl_, tokens_, caps_);
  thinking_ = knows_thinking(source_);
}

std::vector<TextSegment> Renderer::render(std::span<const ChatMessage> msgs,
                                          bool add_generation_prompt,
                                          std::span<const ChatTool> tools,
                                          const json* kwargs) const {
  // A template that knows nothing of tools (it shows neither the tools
  // offered nor calls) gets them as text instead, the way the built-in
  // formats without a tool section write them: the model still learns what
  // it may call. (llama.cpp hands them to such a template, which drops them.)
  std::vector<ChatMessage> lowered;
  if (!tools.empty() && !caps_.tools && !caps_.tool_calls) {
    lowered = chat_tools::lower_generic(msgs, tools);
    msgs = lowered;
    tools = {};
  }
  json messages = json::array();
  for (const ChatMessage& m : msgs) messages.push_back(message_json(m));
  messages = polyfill(std::move(messages), caps_, source_);

  jinja::Object ctx;
  ctx.set("messages", jinja::from_json(messages, true));
  ctx.set("bos_token", jinja::Value(tokens_.bos));
  ctx.set("eos_token", jinja::Value(tokens_.eos));
  ctx.set("enable_thinking", jinja::Value(thinking_));
  if (!tools.empty()) {
    json list = json::array();
    for (const ChatTool& t : tools) list.push_back(tool_json(t));
    ctx.set("tools", jinja::from_json(list, true));
  }
  const std::time_t now = now_ != 0 ? now_ : std::time(nullptr);
  ctx.set("datetime", jinja::Value(format_day(now, "%b %d %Y", now_ != 0)));
  ctx.set("date_string", jinja::Value(format_day(now, "%d %b %Y", now_ != 0)));
  // Earlier answers keep their reasoning unless the client says otherwise
  // (llama.cpp's default), under each name templates use for it.
  bool preserve = true;
  if (kwargs && kwargs->is_object()) {
    // Variables the client chose (chat_template_kwargs, e.g. enable_thinking:
    // false): its strings are input like the messages.
    for (const auto& [k, v] : kwargs->items()) ctx.set(k, jinja::from_json(v, true));
    if (auto it = kwargs->find("preserve_reasoning"); it != kwargs->end() && it->is_boolean())
      preserve = it->get<bool>();
    if (auto it = kwargs->find("reasoning_effort"); it != kwargs->end() && it->is_string())
      ctx.set("reasoning_strength", jinja::from_json(*it, true));
  }
  ctx.set("preserve_reasoning", jinja::Value(preserve));
  ctx.set("preserve_thinking", jinja::Value(preserve));
  for (const char* k : {"clear_thinking", "truncate_history_thinking", "drop_thinking"})
    ctx.set(k, jinja::Value(!preserve));
  if (add_generation_prompt) ctx.set("add_generation_prompt", jinja::Value(true));

  jinja::Str out = tmpl_.render(ctx);
  // The tokenizer adds BOS (and EOS) itself when the vocabulary asks for them:
  // a template that writes them too would double them (llama.cpp strips them the same way).
  size_t begin = 0, end = out.size();
  if (tokens_.add_bos && !tokens_.bos.empty() && out.view().starts_with(tokens_.bos))
    begin = tokens_.bos.size();
  if (tokens_.add_eos && !tokens_.eos.empty() && end - begin >= tokens_.eos.size() &&
      out.view().ends_with(tokens_.eos))
    end -= tokens_.eos.size();
  if (begin != 0 || end != out.size()) out = out.substr(begin, end - begin);

  std::vector<TextSegment> segs;
  for (auto& [text, input] : out.runs()) {
    if (text.empty()) continue;
    segs.push_back(TextSegment{std::move(text), !input});
  }
  return segs;
}

}  // namespace tern::chat_jinja
