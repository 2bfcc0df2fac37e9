// The answer pipeline: the decoder's events at every byte boundary, and each
// API's renderer fed from them, streamed and whole.
#include "../../../src/server/answer.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "../../../src/server/renderers.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using Kind = AnswerEvent::Kind;

// Outputs a reasoning model with tools writes: thinking, text, two calls;
// a call that is not JSON; a tag that is not one; thinking cut off; a bare
// reply.
const char* const kOutputs[] = {
    "<think>\nThe user wants weather.\n</think>\n\nLet me check <b>two</b> places."
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<think>ok</think>Sure <tool_call>{not json}</tool_call> done",
    "<thinking is fun> and <tool_callx> is not a tag",
    "<think>\nstill thinking about <tool_call>",
    "Just an answer, no tags at all.",
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"a \\\"quoted\\\" "
    "}\"}}\n</tool_call>",
    "It ends with a partial <tool_c",
    "Cut off: <tool_call>\n{\"name\": \"g\", \"arguments\": {\"x\": 1}}",
};

AnswerOptions options(bool split, bool tools, bool stream_arguments = false) {
  AnswerOptions o;
  o.split_reasoning = split;
  if (tools) o.tools = ToolCallSyntax{};
  o.stream_arguments = stream_arguments;
  return o;
}

sched::Finish stop() {
  return sched::Finish{};
}

// The events of `text` pushed in pieces cut at `cuts` (ascending offsets).
std::vector<AnswerEvent> decode_in_pieces(std::string_view text, const std::vector<size_t>& cuts,
                                          const AnswerOptions& o, const sched::Finish& f = stop()) {
  AnswerDecoder d(o);
  std::vector<AnswerEvent> all;
  size_t at = 0;
  for (size_t cut : cuts) {
    for (auto& e : d.push(text.substr(at, cut - at))) all.push_back(std::move(e));
    at = cut;
  }
  for (auto& e : d.push(text.substr(at))) all.push_back(std::move(e));
  for (auto& e : d.finish(f)) all.push_back(std::move(e));
  return all;
}

Answer accumulate(const std::vector<AnswerEvent>& events) {
  Answer a;
  a.add(events);
  return a;
}

void expect_same(const Answer& a, const Answer& b, const std::string& where) {
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
  }
}

TEST(AnswerDecoder, SplitsReasoningContentAndCalls) {
  const Answer a = decode_answer(kOutputs[0], options(true, true));
  EXPECT_EQ(a.reasoning, "The user wants weather.");
  EXPECT_EQ(a.content, "Let me check <b>two</b> places.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].name, "f");

  const Answer broken = decode_answer(kOutputs[1], options(true, true));
  EXPECT_EQ(broken.reasoning, "ok");
  EXPECT_EQ(broken.content, "Sure <tool_call>{not json}</tool_call> done");
  EXPECT_TRUE(broken.calls.empty());

  const Answer plain = decode_answer(kOutputs[0], options(false, false));
  EXPECT_EQ(plain.content, kOutputs[0]);
  EXPECT_TRUE(plain.reasoning.empty());

  // What was held back comes out at the end: a tag's start as text, an
  // unterminated but complete call as a call.
  const Answer partial = decode_answer(kOutputs[6], options(false, true));
  EXPECT_EQ(partial.content, "It ends with a partial <tool_c");
  const Answer unterminated = decode_answer(kOutputs[7], options(false, true));
  EXPECT_EQ(unterminated.content, "Cut off: ");
  ASSERT_EQ(unterminated.calls.size(), 1u);
  EXPECT_EQ(unterminated.calls[0].arguments, R"({"x":1})");

  const Answer cut = decode_answer(kOutputs[3], options(true, true));
  EXPECT_EQ(cut.reasoning, "still thinking about <tool_call>");
  EXPECT_TRUE(cut.content.empty());
}

TEST(AnswerDecoder, EveryByteBoundaryGivesTheWholeAnswer) {
  for (const char* text : kOutputs) {
    const std::string_view t = text;
    for (int variant = 0; variant < 4; ++variant) {
      const AnswerOptions o = options(variant & 1, variant & 2);
      const Answer whole = decode_answer(t, o);
      for (size_t cut = 0; cut <= t.size(); ++cut) {
        const auto events = decode_in_pieces(t, {cut}, o);
        expect_same(accumulate(events), whole,
                    std::string(text) + " cut at " + std::to_string(cut));
        ASSERT_EQ(events.back().kind, Kind::End);
        EXPECT_EQ(events.back().calls, whole.calls.size());
      }
      // Byte by byte.
      std::vector<size_t> every;
      for (size_t i = 1; i < t.size(); ++i) every.push_back(i);
      expect_same(accumulate(decode_in_pieces(t, every, o)), whole,
                  std::string(text) + " bytewise");
    }
  }
}

TEST(AnswerDecoder, StreamedArgumentsAddUpToTheCall) {
  for (const char* text : {kOutputs[0], kOutputs[5]}) {
    const std::string_view t = text;
    for (size_t cut = 0; cut <= t.size(); ++cut) {
      const auto events = decode_in_pieces(t, {cut, std::min(t.size(), cut + 7)},
                                           options(true, true, /*stream_arguments=*/true));
      std::map<size_t, std::string> name, args;
      std::vector<AnswerEvent> calls;
      for (const AnswerEvent& e : events) {
        if (e.kind == Kind::CallStart) {
          EXPECT_FALSE(name.count(e.call)) << "a call starts once";
          name[e.call] = e.name;
        }
        if (e.kind == Kind::CallArguments) {
          EXPECT_TRUE(name.count(e.call)) << "arguments after the start";
          args[e.call] += e.text;
        }
        if (e.kind == Kind::Call) calls.push_back(e);
      }
      ASSERT_EQ(calls.size(), name.size()) << "cut " << cut;
      for (const AnswerEvent& c : calls) {
        EXPECT_EQ(name[c.call], c.name);
        // The streamed fragments are the call's JSON as written; the whole
        // call is compact JSON of the same value.
        EXPECT_EQ(json::parse(args[c.call]), json::parse(c.text)) << "cut " << cut;
      }
    }
  }
}

TEST(AnswerDecoder, AnErrorEndsTheAnswerWhereItStands) {
  sched::Finish failed;
  failed.reason = sched::FinishReason::Error;
  failed.error = "boom";
  AnswerDecoder d(options(true, true));
  auto events = d.push("Hi <tool_");  // the tag's start is held back
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hi ");
  events = d.finish(failed);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::End);
  EXPECT_EQ(events[0].finish.error, "boom");
}

// --- renderers ---

struct Sse {
  std::string event;  // "" for unnamed events
  json data;          // null for [DONE]
};

std::vector<Sse> parse_sse(const std::string& wire) {
  std::vector<Sse> out;
  size_t at = 0;
  while (at < wire.size()) {
    const size_t end = wire.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an SSE event ends with a blank line";
    if (end == std::string::npos) break;
    std::string block = wire.substr(at, end - at);
    at = end + 2;
    Sse e;
    if (block.rfind("event: ", 0) == 0) {
      const size_t nl = block.find('\n');
      e.event = block.substr(7, nl - 7);
      block = block.substr(nl + 1);
    }
    EXPECT_EQ(block.rfind("data: ", 0), 0u) << block;
    const std::string data = block.substr(6);
    e.data = data == "[DONE]" ? json(nullptr) : json::parse(data);
    out.push_back(std::move(e));
  }
  return out;
}

sched::StreamChunk chunk_of(std::string text, int n_tokens) {
  sched::StreamChunk c;
  c.text = std::move(text);
  c.n_tokens = n_tokens;
  return c;
}

// Streams `text` cut at `cut` through a renderer, as AnswerStream does.
std::string stream_through(AnswerRenderer& r, std::string_view text, size_t cut,
                           const AnswerOptions& o, const sched::Finish& f = stop()) {
  AnswerDecoder d(o);
  std::string wire = r.open();
  for (std::string_view piece : {text.substr(0, cut), text.substr(cut)}) {
    auto events = d.push(piece);
    wire += r.render(0, chunk_of(std::string(piece), 1), events);
  }
  sched::StreamChunk last = chunk_of("", 0);
  last.finish = f;
  wire += r.render(0, last, d.finish(f));
  const sched::Finish fs[] = {f};
  return wire + r.close(fs);
}

json whole_body(AnswerRenderer& r, std::string_view text, const AnswerOptions& o,
                const sched::Finish& f = stop()) {
  ChoiceOutput c;
  c.text = std::string(text);
  c.finish = f;
  c.answer = decode_answer(text, o);
  return r.body(std::span<const ChoiceOutput>(&c, 1));
}

const ResponseMeta kChat{"chatcmpl-7", 1700000000, "smol", GenerationRequest::Kind::Chat};

std::unique_ptr<AnswerRenderer> openai() {
  return make_openai_renderer({.meta = kChat,
                               .include_usage = true,
                               .n = 1,
                               .logprobs = false,
                               .token_text = {},
                               .echo_bytes = 0});
}

TEST(OpenAiRenderer, StreamAddsUpToTheBodyAtEveryCut) {
  const std::string_view text = kOutputs[0];
  const AnswerOptions streamed = options(true, true, true), whole = options(true, true, false);
  const json body = whole_body(*openai(), text, whole);
  const json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "The user wants weather.");
  EXPECT_EQ(message["content"], "Let me check <b>two</b> places.");
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  EXPECT_EQ(message["tool_calls"][0]["id"], "call_7_0");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const auto events = parse_sse(stream_through(*openai(), text, cut, streamed));
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.front().data["choices"][0]["delta"]["role"], "assistant");
    EXPECT_TRUE(events.back().data.is_null()) << "[DONE] last";
    std::string reasoning, content;
    json calls = json::array();
    std::string finish;
    for (const Sse& e : events) {
      if (e.data.is_null() || e.data["choices"].empty()) continue;
      const json& choice = e.data["choices"][0];
      const json& delta = choice["delta"];
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
      if (delta.contains("content")) content += delta["content"];
      if (delta.contains("tool_calls")) {
        const json& tc = delta["tool_calls"][0];
        const size_t i = tc["index"];
        if (tc.contains("id"))
          calls.push_back({{"id", tc["id"]}, {"name", tc["function"]["name"]}, {"args", ""}});
        calls[i]["args"] =
            calls[i]["args"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
      }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    EXPECT_EQ(reasoning, message["reasoning_content"]) << cut;
    EXPECT_EQ(content, message["content"]) << cut;
    ASSERT_EQ(calls.size(), 2u) << cut;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(calls[i]["id"], message["tool_calls"][i]["id"]);
      EXPECT_EQ(calls[i]["name"], message["tool_calls"][i]["function"]["name"]);
      EXPECT_EQ(json::parse(calls[i]["args"].get<std::string>()),
                json::parse(message["tool_calls"][i]["function"]["arguments"].get<std::string>()));
    }
    EXPECT_EQ(finish, "tool_calls");
    // The usage chunk (choices: []) before [DONE].
    EXPECT_EQ(events[events.size() - 2].data["choices"].size(), 0u);
  }
}

TEST(OpenAiRenderer, ErrorEndsTheStreamWithAnErrorEvent) {
  sched::Finish failed;
  failed.reason = sched::FinishReason::Error;
  failed.error = "boom";
  const auto events =
      parse_sse(stream_through(*openai(), "Hello", 2, options(false, false), failed));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[events.size() - 2].data["error"]["message"], "Generation failed: boom");
  EXPECT_TRUE(events.back().data.is_null());
}

AnthropicRendering anthropic_config(bool thinking) {
  return {.id = "msg_req-9",
          .model = "smol",
          .prompt_tokens = 12,
          .thinking_blocks = thinking,
          .blocks_on_demand = true};
}

TEST(AnthropicRenderer, StreamAddsUpToTheBodyAtEveryCut) {
  const std::string_view text = kOutputs[0];
  const AnswerOptions o = options(true, true);
  auto r = make_anthropic_renderer(anthropic_config(true));
  const json body = whole_body(*r, text, o);
  ASSERT_EQ(body["content"].size(), 4u);  // thinking, text, two tool_use
  EXPECT_EQ(body["content"][0]["type"], "thinking");
  EXPECT_EQ(body["content"][1]["text"], "Let me check <b>two</b> places.");
  EXPECT_EQ(body["content"][2]["id"], "toolu_req-9_0");
  EXPECT_EQ(body["content"][2]["input"]["city"], "Paris");
  EXPECT_EQ(body["stop_reason"], "tool_use");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const auto events =
        parse_sse(stream_through(*make_anthropic_renderer(anthropic_config(true)), text, cut, o));
    json blocks = json::array();
    int open = -1;
    std::string stop;
    for (const Sse& e : events) {
      const json& d = e.data;
      EXPECT_EQ(d["type"], e.event);
      if (e.event == "content_block_start") {
        EXPECT_EQ(open, -1) << "one block open at a time";
        open = d["index"];
        EXPECT_EQ(size_t(open), blocks.size());
        blocks.push_back(d["content_block"]);
      } else if (e.event == "content_block_delta") {
        EXPECT_EQ(d["index"], open);
        json& b = blocks[size_t(open)];
        const json& delta = d["delta"];
        if (delta["type"] == "text_delta")
          b["text"] = b["text"].get<std::string>() + delta["text"].get<std::string>();
        if (delta["type"] == "thinking_delta")
          b["thinking"] = b["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
        if (delta["type"] == "input_json_delta")
          b["input"] = json::parse(delta["partial_json"].get<std::string>());
      } else if (e.event == "content_block_stop") {
        EXPECT_EQ(d["index"], open);
        open = -1;
      } else if (e.event == "message_delta") {
        stop = d["delta"]["stop_reason"];
      }
    }
    EXPECT_EQ(open, -1);
    EXPECT_EQ(events.back().event, "message_stop");
    EXPECT_EQ(stop, "tool_use");
    EXPECT_EQ(blocks, body["content"]) << cut;
  }
}

TEST(AnthropicRenderer, HiddenThinkingAndTheEmptyTextBlock) {
  // Thinking not asked for: only the answer; an answer with no text still
  // has its (empty) text block.
  const auto events = parse_sse(stream_through(*make_anthropic_renderer(anthropic_config(false)),
                                               "<think>hmm</think>", 5, options(true, false)));
  std::vector<std::string> names;
  for (const Sse& e : events) names.push_back(e.event);
  EXPECT_EQ(names,
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_stop",
                                      "message_delta", "message_stop"}));
  EXPECT_EQ(events[1].data["content_block"]["type"], "text");
}

ResponsesRendering responses_config(std::vector<json>* remembered) {
  ResponsesMeta m;
  m.id = "resp_abc";
  m.item_id = "msg_abc";
  m.reasoning_id = "rs_abc";
  m.model = "smol";
  m.created_at = 1700000000;
  m.echo = json::object();
  return {
      .meta = m,
      .items_on_demand = true,
      .remember = [remembered](const std::string& text, std::span<const ToolCallOut> calls,
                               const json& response) {
        remembered->push_back({{"text", text}, {"calls", calls.size()}, {"response", response}});
      }};
}

TEST(ResponsesRenderer, StreamAddsUpToTheBodyAtEveryCut) {
  const std::string_view text = kOutputs[0];
  const AnswerOptions o = options(true, true);
  std::vector<json> remembered;
  const json body = whole_body(*make_responses_renderer(responses_config(&remembered)), text, o);
  ASSERT_EQ(remembered.size(), 1u);
  EXPECT_EQ(remembered[0]["text"], "Let me check <b>two</b> places.");
  EXPECT_EQ(remembered[0]["calls"], 2);
  const json& output = body["output"];
  ASSERT_EQ(output.size(), 4u);  // reasoning, message, two calls
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[1]["content"][0]["text"], "Let me check <b>two</b> places.");
  EXPECT_EQ(output[2]["name"], "get_weather");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    remembered.clear();
    const auto events = parse_sse(
        stream_through(*make_responses_renderer(responses_config(&remembered)), text, cut, o));
    std::string reasoning, content;
    std::map<int, std::string> args;
    int sequence = 0;
    for (const Sse& e : events) {
      EXPECT_EQ(e.data["sequence_number"], sequence++);
      if (e.event == "response.reasoning_text.delta") reasoning += e.data["delta"];
      if (e.event == "response.output_text.delta") content += e.data["delta"];
      if (e.event == "response.function_call_arguments.delta")
        args[e.data["output_index"]] += e.data["delta"].get<std::string>();
    }
    EXPECT_EQ(events.back().event, "response.completed");
    EXPECT_EQ(reasoning, output[0]["content"][0]["text"]) << cut;
    EXPECT_EQ(content, output[1]["content"][0]["text"]) << cut;
    ASSERT_EQ(args.size(), 2u);
    EXPECT_EQ(args[2], output[2]["arguments"]);
    EXPECT_EQ(args[3], output[3]["arguments"]);
    EXPECT_EQ(events.back().data["response"]["output"], output) << cut;
    ASSERT_EQ(remembered.size(), 1u);
  }
}

TEST(ResponsesRenderer, OnlyCallsHaveNoMessageItemAndFailuresAreNotStored) {
  std::vector<json> remembered;
  const json body =
      whole_body(*make_responses_renderer(responses_config(&remembered)),
                 "<think>x</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                 options(true, true));
  ASSERT_EQ(body["output"].size(), 2u);
  EXPECT_EQ(body["output"][0]["type"], "reasoning");
  EXPECT_EQ(body["output"][1]["type"], "function_call");
  sched::Finish failed;
  failed.reason = sched::FinishReason::Error;
  remembered.clear();
  const auto events =
      parse_sse(stream_through(*make_responses_renderer(responses_config(&remembered)), "Hello", 2,
                               options(false, false), failed));
  EXPECT_EQ(events.back().event, "response.failed");
  EXPECT_TRUE(remembered.empty());
}

std::vector<json> parse_lines(const std::string& wire) {
  std::vector<json> out;
  size_t at = 0;
  while (at < wire.size()) {
    const size_t nl = wire.find('\n', at);
    EXPECT_NE(nl, std::string::npos) << "every message ends its line";
    if (nl == std::string::npos) break;
    out.push_back(json::parse(wire.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

WsRendering ws_config() {
  WsRendering r;
  r.id = "g1";
  r.request_id = "req-3.1";
  r.model = "smol";
  r.prompt_tokens = 5;
  return r;
}

TEST(WsRenderer, MessagesAddUpToTheAnswerAtEveryCut) {
  const std::string_view text = kOutputs[0];
  const AnswerOptions o = options(true, true);
  const Answer whole = decode_answer(text, o);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const auto messages = parse_lines(stream_through(*make_ws_renderer(ws_config()), text, cut, o));
    ASSERT_GE(messages.size(), 3u);
    EXPECT_EQ(messages.front()["type"], "start");
    EXPECT_EQ(messages.front()["request_id"], "req-3.1");
    Answer seen;
    int tokens = 0;
    for (const json& m : messages) {
      EXPECT_EQ(m["id"], "g1");
      if (m["type"] == "delta") {
        seen.content += m["text"].get<std::string>();
        if (m.contains("reasoning")) seen.reasoning += m["reasoning"].get<std::string>();
        tokens += m["tokens"].get<int>();
      }
      if (m["type"] == "tool_call") {
        EXPECT_EQ(m["index"], seen.calls.size());
        EXPECT_EQ(m["call_id"], "call_req-3.1_" + std::to_string(seen.calls.size()));
        seen.calls.push_back({m["name"], m["arguments"]});
      }
    }
    expect_same(seen, whole, "cut " + std::to_string(cut));
    EXPECT_EQ(tokens, 2) << "a delta per drain that took tokens";
    EXPECT_EQ(messages.back()["type"], "done");
    EXPECT_EQ(messages.back()["finish_reason"], "tool_calls");
  }
}

TEST(WsRenderer, AResponsesMessageEndsWithTheResponseObject) {
  std::vector<json> remembered;
  WsRendering r = ws_config();
  r.response = make_responses_renderer(responses_config(&remembered));
  r.response_options = options(false, true);
  const auto messages = parse_lines(stream_through(
      *make_ws_renderer(std::move(r)),
      "Hi <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", 4, options(false, false)));
  const json& done = messages.back();
  EXPECT_EQ(done["type"], "done");
  EXPECT_EQ(done["response"]["status"], "completed");
  ASSERT_EQ(done["response"]["output"].size(), 2u);
  EXPECT_EQ(done["response"]["output"][1]["type"], "function_call");
  EXPECT_EQ(remembered.size(), 1u);
}

}  // namespace
}  // namespace tern::server
