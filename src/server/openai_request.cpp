#include "tern/server/openai_request.h"

#include <algorithm>
#include <limits>

#include "json_fields.h"
#include "openai_tools.h"
#include "sampling_fields.h"
#include "tern/sampling/json_schema.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

// Fields both endpoints share that only make sense at their neutral value.
void reject_unsupported_common(const json& body) {
  int64_t best_of = 1;
  if (get_int(body, "best_of", best_of) && best_of != 1)
    unsupported("best_of", "only best_of=1 is supported.");
  if (const json* v = field(body, "suffix"))
    if (!(v->is_string() && v->get<std::string>().empty()))
      unsupported("suffix", "suffix is not supported.");
}

void parse_stop(const json& body, SamplingParams& p) {
  const json* v = field(body, "stop");
  if (!v) return;
  if (v->is_string()) {
    p.stop = {v->get<std::string>()};
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string()) wrong_type("stop", "a string or an array of strings", s);
      p.stop.push_back(s.get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", *v);
  }
  if (p.stop.size() > kMaxStopStrings)
    bad_value("stop", "at most " + std::to_string(kMaxStopStrings) + " stop strings are allowed.");
  for (const auto& s : p.stop) {
    if (s.empty()) bad_value("stop", "stop strings must not be empty.");
    if (s.size() > kMaxStopBytes)
      bad_value("stop",
                "a stop string is longer than " + std::to_string(kMaxStopBytes) + " bytes.");
  }
}

void parse_max_tokens(const json& body, const char* key, GenerationRequest& r) {
  int64_t v = 0;
  if (!get_int(body, key, v)) return;
  if (v < 1) bad_value(key, std::to_string(v) + " is less than the minimum of 1.");
  r.params.max_tokens = int(std::min<int64_t>(v, std::numeric_limits<int>::max()));
  r.max_tokens_given = true;
}

// response_format: {"type": "text"}, {"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}. The
// schema is compiled here so a keyword the grammar cannot enforce is a 400
// naming it.
void parse_response_format(const json& body, SamplingParams& p) {
  const json* v = field(body, "response_format");
  if (!v) return;
  if (!v->is_object()) wrong_type("response_format", "an object", *v);
  const json* t = field(*v, "type");
  if (!t || !t->is_string())
    throw ApiError::bad_request("Missing required parameter: 'response_format.type'.",
                                "response_format.type", "missing_required_parameter");
  const std::string type = t->get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    p.response_format = ResponseFormat::JsonObject;
    return;
  }
  if (type != "json_schema")
    bad_value("response_format.type",
              "expected 'text', 'json_object' or 'json_schema', got '" + type + "'.");
  const json* js = field(*v, "json_schema");
  if (!js || !js->is_object())
    wrong_type("response_format.json_schema", "an object", js ? *js : json());
  const json* name = field(*js, "name");
  if (!name || !name->is_string())
    throw ApiError::bad_request("Missing required parameter: 'response_format.json_schema.name'.",
                                "response_format.json_schema.name", "missing_required_parameter");
  const json* schema = field(*js, "schema");
  const std::string where = "response_format.json_schema.schema";
  if (!schema) {
    p.json_schema = "{}";  // OpenAI: no schema means any JSON value
  } else if (schema->is_object() || schema->is_boolean()) {
    p.json_schema = schema->dump();
  } else {
    wrong_type(where, "an object", *schema);
  }
  p.response_format = ResponseFormat::JsonSchema;
  try {
    JsonGrammar::from_schema(p.json_schema);
  } catch (const SchemaError& e) {
    throw ApiError::bad_request(
        "Invalid schema for response_format '" + name->get<std::string>() + "': " + e.what(), where,
        "invalid_json_schema");
  }
}

// n: how many choices (each its own sequence, seeds seed, seed + 1, ...).
void parse_n(const json& body, GenerationRequest& r) {
  int64_t n = 1;
  if (!get_int(body, "n", n)) return;
  if (n < 1 || n > kMaxChoices)
    bad_value("n", "must be between 1 and " + std::to_string(kMaxChoices) + ".");
  r.n = int(n);
}

// logit_bias: {"<token id>": bias in [-100, 100]}.
void parse_logit_bias(const json& body, SamplingParams& p) {
  const json* v = field(body, "logit_bias");
  if (!v) return;
  if (!v->is_object()) wrong_type("logit_bias", "an object", *v);
  if (v->size() > kMaxLogitBias)
    bad_value("logit_bias", "at most " + std::to_string(kMaxLogitBias) + " entries are allowed.");
  for (const auto& [key, bias] : v->items()) {
    const std::string where = "logit_bias." + key;
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      bad_value("logit_bias", "keys must be token ids (non-negative integers), got '" + key + "'.");
    if (!bias.is_number()) wrong_type(where, "a number", bias);
    const double b = bias.get<double>();
    check_range(where.c_str(), b, -kMaxLogitBiasValue, kMaxLogitBiasValue);
    p.logit_bias.emplace_back(int32_t(id), float(b));
  }
}

// Chat: logprobs (bool) + top_logprobs (0..20, needs logprobs: true).
void parse_chat_logprobs(const json& body, SamplingParams& p) {
  bool on = false;
  get_bool(body, "logprobs", on);
  int64_t k = 0;
  if (get_int(body, "top_logprobs", k)) {
    if (!on)
      bad_value("top_logprobs", "'logprobs' must be set to true when 'top_logprobs' is used.");
    check_range("top_logprobs", double(k), 0, kMaxTopLogprobs);
  }
  p.logprobs = on ? int(k) : -1;
}

// Completions: logprobs is the number of alternatives (0..20), null or absent: off.
void parse_completion_logprobs(const json& body, SamplingParams& p) {
  int64_t k = 0;
  if (!get_int(body, "logprobs", k)) return;
  check_range("logprobs", double(k), 0, kMaxTopLogprobs);
  p.logprobs = int(k);
}

// "lora": "NAME" or {"name": "NAME", "scale": x}: the adapter to run with
// (resolved against the loaded adapters when the request is submitted).
void parse_lora(const json& body, GenerationRequest& r, UnknownFields policy) {
  const json* v = field(body, "lora");
  if (!v || v->is_null()) return;
  if (v->is_string()) {
    r.lora = v->get<std::string>();
  } else if (v->is_object()) {
    check_fields(*v, "lora.", {"name", "scale"}, policy);
    if (!get_string(*v, "name", r.lora)) {
      throw ApiError::bad_request("'lora.name' is required: the name of a loaded adapter.",
                                  "lora.name", "invalid_value");
    }
    double d = 1.0;
    if (get_number(*v, "scale", d)) check_range("lora.scale", d, -16.0, 16.0);
    r.lora_scale = float(d);
  } else {
    wrong_type("lora", "a string or an object", *v);
  }
  if (r.lora.empty()) {
    throw ApiError::bad_request("'lora' names no adapter.", "lora", "invalid_value");
  }
}

// Sampling settings and streaming flags, common to both endpoints.
// speculative (tern's extension): {"type": "auto" | "ngram" | "draft" |
// "off", "max_tokens": 0-64}: this request's speculative decoding: its guess
// source, or off; at most that many guessed tokens per verify (within the
// server's --spec-draft).
void parse_speculative(const json& body, GenerationRequest& r, UnknownFields policy) {
  const json* v = field(body, "speculative");
  if (!v || v->is_null()) return;
  if (!v->is_object()) wrong_type("speculative", "an object", *v);
  check_fields(*v, "speculative.", {"type", "max_tokens"}, policy);
  if (const json* t = field(*v, "type")) {
    if (!t->is_string()) wrong_type("speculative.type", "a string", *t);
    const std::string type = t->get<std::string>();
    if (type == "off") {
      r.spec_max_tokens = 0;
    } else if (type == "ngram" || type == "draft") {
      r.spec_type = type;
    } else if (type != "auto") {
      bad_value("speculative.type", "'" + type +
                                        "' is not supported. Supported values are: 'auto', "
                                        "'ngram', 'draft' and 'off'.");
    }
  }
  if (const json* m = field(*v, "max_tokens")) {
    if (!m->is_number_integer()) wrong_type("speculative.max_tokens", "an integer", *m);
    const int64_t n = m->get<int64_t>();
    if (n < 0 || n > 64) bad_value("speculative.max_tokens", "must be between 0 and 64.");
    if (r.spec_max_tokens != 0) r.spec_max_tokens = int(n);
  }
}

void parse_common(const json& body, GenerationRequest& r, UnknownFields policy) {
  if (const json* v = field(body, "model")) {
    if (!v->is_string()) wrong_type("model", "a string", *v);
    r.model = v->get<std::string>();
  }
  if (const json* v = field(body, "user")) {
    if (!v->is_string()) wrong_type("user", "a string", *v);
    r.session = v->get<std::string>();
    if (r.session.size() > kMaxSessionKey)
      bad_value("user", "must be at most " + std::to_string(kMaxSessionKey) + " bytes.");
  }
  parse_lora(body, r, policy);
  reject_unsupported_common(body);
  parse_n(body, r);
  SamplingParams& p = r.params;
  parse_logit_bias(body, p);
  parse_max_tokens(body, "max_tokens", r);
  read_sampling(body, kOpenAiSampling, p);
  parse_stop(body, p);
  get_bool(body, "stream", r.stream);
  parse_speculative(body, r, policy);
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) wrong_type("stream_options", "an object", *v);
    check_fields(*v, "stream_options.", {"include_usage"}, policy);
    get_bool(*v, "include_usage", r.include_usage);
  }
  validate_sampling(p);
}

std::string message_content(const json& m, const std::string& where, const std::string& role) {
  const json* c = field(m, "content");
  if (!c) {
    if (role == "assistant") return {};
    throw ApiError::bad_request("Missing required parameter: '" + where + ".content'.",
                                where + ".content", "missing_required_parameter");
  }
  return text_content(*c, where + ".content", {"text"});
}

std::vector<Message> parse_messages(const json& body, UnknownFields policy) {
  const json* msgs = field(body, "messages");
  if (!msgs)
    throw ApiError::bad_request("Missing required parameter: 'messages'.", "messages",
                                "missing_required_parameter");
  if (!msgs->is_array()) wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) bad_value("messages", "empty array. Expected an array with minimum length 1.");
  std::vector<Message> out;
  out.reserve(msgs->size());
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(where, "an object", m);
    check_fields(
        m, "messages[].",
        {"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "reasoning_content"},
        policy);
    if (const json* v = field(m, "refusal"))
      if (!(v->is_string() && v->get<std::string>().empty()))
        unsupported(where + ".refusal", "refusals in messages are not supported.");
    const json* role = field(m, "role");
    if (!role)
      throw ApiError::bad_request("Missing required parameter: '" + where + ".role'.",
                                  where + ".role", "missing_required_parameter");
    if (!role->is_string()) wrong_type(where + ".role", "a string", *role);
    // "developer" stays itself: the chat template decides (gpt-oss's knows it,
    // the others read it as "system").
    std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
      bad_value(where + ".role", "'" + role->get<std::string>() +
                                     "' is not supported. Supported values are: 'system', "
                                     "'developer', 'user', 'assistant' and 'tool'.");
    out.push_back({r, message_content(m, where, r)});
    parse_message_tools(m, where, out.back());
    // The thinking of an earlier answer, as llama.cpp and DeepSeek's API take
    // it back (templates that keep reasoning in the history show it).
    if (const json* v = field(m, "reasoning_content"); v && !v->is_null()) {
      if (r != "assistant")
        bad_value(where + ".reasoning_content", "only assistant messages carry reasoning.");
      if (!v->is_string()) wrong_type(where + ".reasoning_content", "a string", *v);
      out.back().reasoning_content = v->get<std::string>();
    }
  }
  return out;
}

// chat_template_kwargs: extra variables for the model's chat template (an
// object of at most 64 entries, 64 KiB as JSON); reasoning_effort: OpenAI's
// field, handed to the template as llama.cpp does ("none" turns thinking off).
void parse_template_kwargs(const json& body, GenerationRequest& r) {
  if (const json* k = field(body, "chat_template_kwargs"); k && !k->is_null()) {
    if (!k->is_object()) wrong_type("chat_template_kwargs", "an object", *k);
    if (k->size() > 64) bad_value("chat_template_kwargs", "more than 64 entries.");
    const std::string text = k->dump();
    if (text.size() > (64u << 10)) bad_value("chat_template_kwargs", "larger than 64 KiB.");
    r.chat_template_kwargs = nlohmann::ordered_json::parse(text);
  }
  if (const json* e = field(body, "reasoning_effort"); e && !e->is_null()) {
    if (!e->is_string()) wrong_type("reasoning_effort", "a string", *e);
    const std::string v = e->get<std::string>();
    if (v != "none" && v != "minimal" && v != "low" && v != "medium" && v != "high")
      bad_value("reasoning_effort", "'" + v +
                                        "' is not supported. Supported values are: 'none', "
                                        "'minimal', 'low', 'medium' and 'high'.");
    if (!r.chat_template_kwargs.is_object())
      r.chat_template_kwargs = nlohmann::ordered_json::object();
    if (v == "none") {
      r.chat_template_kwargs["enable_thinking"] = false;
    } else {
      r.chat_template_kwargs["reasoning_effort"] = v;
    }
  }
}

// prediction: {"type": "content", "content": a string or text parts}, at
// most 1 MiB of text (the tokens are checked against the context later).
void parse_prediction(const json& body, GenerationRequest& r) {
  const json* p = field(body, "prediction");
  if (!p || p->is_null()) return;
  if (!p->is_object()) wrong_type("prediction", "an object", *p);
  const json* type = field(*p, "type");
  if (!type || !type->is_string() || type->get<std::string>() != "content")
    bad_value("prediction.type", "expected 'content'.");
  const json* c = field(*p, "content");
  if (!c) missing("prediction.content");
  if (c->is_string()) {
    r.prediction = c->get<std::string>();
  } else if (c->is_array()) {
    for (size_t i = 0; i < c->size(); ++i) {
      const json& part = (*c)[i];
      const std::string where = "prediction.content[" + std::to_string(i) + "]";
      if (!part.is_object() || !field(part, "type") || (*field(part, "type")) != "text")
        bad_value(where, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported.");
      const json* t = field(part, "text");
      if (!t || !t->is_string()) wrong_type(where + ".text", "a string", t ? *t : json());
      r.prediction += t->get<std::string>();
    }
  } else {
    wrong_type("prediction.content", "a string or an array of text parts", *c);
  }
  if (r.prediction.size() > (1u << 20)) bad_value("prediction.content", "longer than 1 MiB.");
}

void parse_prompt(const json& body, GenerationRequest& r) {
  const json* p = field(body, "prompt");
  if (!p)
    throw ApiError::bad_request("Missing required parameter: 'prompt'.", "prompt",
                                "missing_required_parameter");
  const json* one = p;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) unsupported("prompt", "only one prompt per request is supported.");
    one = &p->front();
  }
  if (one->is_string()) {
    r.prompt = one->get<std::string>();
    return;
  }
  if (!one->is_array()) wrong_type("prompt", "a string or an array of token ids", *one);
  if (one->empty()) bad_value("prompt", "the token array is empty.");
  for (const auto& t : *one) {
    if (!t.is_number_integer()) wrong_type("prompt", "an array of token ids", t);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      bad_value("prompt", "token id out of range.");
    r.prompt_tokens.push_back(int32_t(id));
  }
}

}  // namespace

json parse_json_body(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ApiError::bad_request(
        "We could not parse the JSON body of your request. The body must be valid JSON.", {},
        "invalid_json");
  if (!j.is_object())
    throw ApiError::bad_request(
        "The request body must be a JSON object, but got " + std::string(type_name(j)) + ".", {},
        "invalid_json");
  return j;
}

GenerationRequest parse_chat_request(const json& body, const std::vector<std::string>& extra,
                                     UnknownFields policy) {
  check_fields(body, "",
               {"model",
                "lora",
                "messages",
                "max_tokens",
                "max_completion_tokens",
                "temperature",
                "top_p",
                "seed",
                "stop",
                "presence_penalty",
                "frequency_penalty",
                "n",
                "stream",
                "stream_options",
                "user",
                "logprobs",
                "top_logprobs",
                "logit_bias",
                "response_format",
                "tools",
                "tool_choice",
                "parallel_tool_calls",
                "metadata",
                "store",
                "service_tier",
                "top_k",
                "min_p",
                "repeat_penalty",
                "repeat_last_n",
                "ignore_eos",
                "cache_prompt",
                "speculative",
                "chat_template_kwargs",
                "reasoning_effort",
                "prediction"},
               policy, extra);
  GenerationRequest r;
  r.kind = GenerationRequest::Kind::Chat;
  r.messages = parse_messages(body, policy);
  parse_response_format(body, r.params);
  parse_common(body, r, policy);
  parse_chat_logprobs(body, r.params);
  parse_max_tokens(body, "max_completion_tokens", r);
  parse_tools(body, r);
  parse_template_kwargs(body, r);
  parse_prediction(body, r);
  return r;
}

GenerationRequest parse_completion_request(const json& body, const std::vector<std::string>& extra,
                                           UnknownFields policy) {
  check_fields(body, "",
               {"model",
                "lora",
                "prompt",
                "max_tokens",
                "temperature",
                "top_p",
                "seed",
                "stop",
                "presence_penalty",
                "frequency_penalty",
                "n",
                "best_of",
                "stream",
                "stream_options",
                "user",
                "logprobs",
                "logit_bias",
                "echo",
                "suffix",
                "metadata",
                "response_format",
                "top_k",
                "min_p",
                "repeat_penalty",
                "repeat_last_n",
                "ignore_eos",
                "cache_prompt",
                "speculative"},
               policy, extra);
  GenerationRequest r;
  r.kind = GenerationRequest::Kind::Completion;
  if (body.contains("messages"))
    unsupported("messages",
                "/v1/completions takes a 'prompt'; send messages to /v1/chat/completions.");
  parse_prompt(body, r);
  get_bool(body, "echo", r.echo);
  parse_response_format(body, r.params);
  if (r.echo && !r.prompt_tokens.empty()) unsupported("echo", "echo needs a text prompt.");
  parse_common(body, r, policy);
  parse_completion_logprobs(body, r.params);
  if (r.echo && r.params.logprobs >= 0)
    unsupported("echo", "echo with logprobs (the prompt's log probabilities) is not supported.");
  if (!r.max_tokens_given) r.params.max_tokens = kCompletionDefaultMaxTokens;
  return r;
}

}  // namespace tern::server
