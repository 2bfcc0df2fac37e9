// Tool calling fields of OpenAI chat requests (see openai_tools.h).
#include "openai_tools.h"

#include <set>

#include "json_fields.h"
#include "tern/sampling/json_schema.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

inline constexpr size_t kMaxTools = 128;

bool valid_function_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::string require_string(const json& o, const char* key, const std::string& where) {
  const json* v = field(o, key);
  if (!v) missing(where + "." + key);
  if (!v->is_string()) wrong_type(where + "." + key, "a string", *v);
  return v->get<std::string>();
}

// A JSON Schema given as an object (or, leniently, as JSON text).
std::string schema_text(const json& v, const std::string& where) {
  if (v.is_object()) return v.dump();
  if (v.is_string()) {
    const json j = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      throw ApiError::bad_request("Invalid '" + where + "': the schema is not valid JSON.", where,
                                  "invalid_json_schema");
    if (j.is_object()) return j.dump();
  }
  wrong_type(where, "a JSON Schema object", v);
}

void check_schema(const ToolSpec& t, const std::string& where) {
  try {
    JsonGrammar::from_schema(t.parameters);
  } catch (const SchemaError& e) {
    throw ApiError::bad_request(
        "Invalid schema for function '" + t.name + "': " + e.what() +
            " (tool schemas are enforced when strict is true or tool_choice forces a call; see "
            "the supported subset in README.md)",
        where, "invalid_json_schema");
  }
}

ToolSpec parse_tool(const json& t, const std::string& where) {
  if (!t.is_object()) wrong_type(where, "an object", t);
  const std::string type = require_string(t, "type", where);
  if (type != "function")
    bad_value(where + ".type", "'" + type + "' is not supported; only 'function' tools are.");
  const json* f = field(t, "function");
  if (!f) missing(where + ".function");
  if (!f->is_object()) wrong_type(where + ".function", "an object", *f);
  const std::string fw = where + ".function";
  ToolSpec spec;
  spec.name = require_string(*f, "name", fw);
  if (!valid_function_name(spec.name))
    bad_value(fw + ".name", "'" + spec.name +
                                "' is not a valid function name: use 1 to 64 letters, digits, "
                                "underscores and dashes.");
  get_string(*f, "description", spec.description);
  if (const json* p = field(*f, "parameters"))
    spec.parameters = schema_text(*p, fw + ".parameters");
  get_bool(*f, "strict", spec.strict);
  return spec;
}

void parse_tool_choice(const json& body, GenerationRequest& r) {
  const json* v = field(body, "tool_choice");
  if (!v) return;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto")
      r.tool_choice = ToolChoice::Auto;
    else if (s == "none")
      r.tool_choice = ToolChoice::None;
    else if (s == "required")
      r.tool_choice = ToolChoice::Required;
    else
      bad_value("tool_choice",
                "'" + s +
                    "' is not one of 'none', 'auto', 'required' or a named "
                    "function {\"type\": \"function\", \"function\": {\"name\": ...}}.");
    if (r.tool_choice == ToolChoice::Required && r.tools.empty())
      bad_value("tool_choice", "'required' needs at least one tool in 'tools'.");
    return;
  }
  if (!v->is_object()) wrong_type("tool_choice", "a string or an object", *v);
  const json* f = field(*v, "function");
  if (!f || !f->is_object()) missing("tool_choice.function");
  const std::string name = require_string(*f, "name", "tool_choice.function");
  bool known = false;
  for (const ToolSpec& t : r.tools) known = known || t.name == name;
  if (!known) bad_value("tool_choice.function.name", "no tool named '" + name + "' is in 'tools'.");
  r.tool_choice = ToolChoice::Named;
  r.tool_choice_name = name;
}

}  // namespace

void parse_tools(const json& body, GenerationRequest& r) {
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) wrong_type("tools", "an array", *v);
    if (v->size() > kMaxTools)
      bad_value("tools", "at most " + std::to_string(kMaxTools) + " tools are allowed.");
    std::set<std::string> names;
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string where = "tools[" + std::to_string(i) + "]";
      ToolSpec t = parse_tool((*v)[i], where);
      if (!names.insert(t.name).second)
        bad_value(where + ".function.name", "the name '" + t.name + "' is used by two tools.");
      r.tools.push_back(std::move(t));
    }
  }
  parse_tool_choice(body, r);
  get_bool(body, "parallel_tool_calls", r.parallel_tool_calls);
  const bool forced = r.tool_choice == ToolChoice::Required || r.tool_choice == ToolChoice::Named;
  for (size_t i = 0; i < r.tools.size(); ++i)
    if (r.tools[i].strict || (forced && (r.tool_choice == ToolChoice::Required ||
                                         r.tools[i].name == r.tool_choice_name)))
      check_schema(r.tools[i], "tools[" + std::to_string(i) + "].function.parameters");
  if (r.uses_tools() && (r.n > 1 || r.params.logprobs >= 0))
    unsupported("tools", "tools with n > 1 or logprobs are not supported.");
}

void parse_responses_tools(const json& body, GenerationRequest& r) {
  json chat = json::object();
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) wrong_type("tools", "an array", *v);
    json tools = json::array();
    for (const json& t : *v) {
      if (!t.is_object() || !t.contains("type") || t["type"] != "function") {
        tools.push_back(t);  // parse_tool names the problem
        continue;
      }
      json f = t;
      f.erase("type");
      tools.push_back(json{{"type", "function"}, {"function", std::move(f)}});
    }
    chat["tools"] = std::move(tools);
  }
  if (const json* v = field(body, "tool_choice")) {
    if (v->is_object() && v->contains("name"))
      chat["tool_choice"] = json{{"type", "function"}, {"function", {{"name", (*v)["name"]}}}};
    else
      chat["tool_choice"] = *v;
  }
  if (const json* v = field(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = *v;
  parse_tools(chat, r);
}

void parse_message_tools(const json& m, const std::string& where, Message& out) {
  if (out.role == "tool") {
    const json* id = field(m, "tool_call_id");
    if (!id)
      throw ApiError::bad_request("Missing required parameter: '" + where + ".tool_call_id'.",
                                  where + ".tool_call_id", "missing_required_parameter");
    if (!id->is_string()) wrong_type(where + ".tool_call_id", "a string", *id);
    out.tool_call_id = id->get<std::string>();
    return;
  }
  const json* calls = field(m, "tool_calls");
  if (!calls) return;
  if (out.role != "assistant")
    bad_value(where + ".tool_calls", "only assistant messages carry tool calls.");
  if (!calls->is_array()) wrong_type(where + ".tool_calls", "an array", *calls);
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& c = (*calls)[i];
    const std::string cw = where + ".tool_calls[" + std::to_string(i) + "]";
    if (!c.is_object()) wrong_type(cw, "an object", c);
    MessageToolCall call;
    call.id = require_string(c, "id", cw);
    const json* f = field(c, "function");
    if (!f) missing(cw + ".function");
    if (!f->is_object()) wrong_type(cw + ".function", "an object", *f);
    call.name = require_string(*f, "name", cw + ".function");
    call.arguments = require_string(*f, "arguments", cw + ".function");
    if (json::parse(call.arguments, nullptr, false).is_discarded())
      bad_value(cw + ".function.arguments", "the arguments are not valid JSON.");
    out.tool_calls.push_back(std::move(call));
  }
}

SamplingParams tool_constrained_params(const GenerationRequest& g, const ToolCallSyntax& syntax) {
  SamplingParams p = g.params;
  if (!g.uses_tools()) return p;
  if (g.tool_choice == ToolChoice::Auto) {
    // Strict tools under auto: the text is free, but a call, once the model
    // opens one, is constrained (non-strict tools' arguments: any object).
    bool strict = false;
    for (const ToolSpec& t : g.tools) strict = strict || t.strict;
    if (!strict || !syntax.tagged() || syntax.form != ToolCallSyntax::Form::Object ||
        p.response_format != ResponseFormat::Text)
      return p;
    std::vector<ToolSpec> tools = g.tools;
    for (ToolSpec& t : tools)
      if (!t.strict) t.parameters = "{\"type\":\"object\"}";
    p.response_format = ResponseFormat::JsonSchema;
    p.json_schema = tool_call_schema(tools, syntax.args_key);
    p.json_open = syntax.frame_open();
    p.json_close = syntax.frame_close();
    p.json_trigger = syntax.open;
    return p;
  }
  std::vector<ToolSpec> allowed;
  for (const ToolSpec& t : g.tools)
    if (g.tool_choice == ToolChoice::Required || t.name == g.tool_choice_name) allowed.push_back(t);
  p.response_format = ResponseFormat::JsonSchema;
  p.json_schema = tool_call_schema(allowed, syntax.args_key);
  p.json_open = syntax.frame_open();
  p.json_close = syntax.frame_close();
  p.json_repeat = g.parallel_tool_calls && syntax.tagged();
  return p;
}

}  // namespace tern::server
