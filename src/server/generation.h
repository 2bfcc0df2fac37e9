#pragma once
// From a parsed OpenAI request to a running generation: build the prompt
// (chat template or raw text), tokenize it, check it fits the context, and
// submit it to the scheduler. Shared by the HTTP routes and the WebSocket.
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "net.h"
#include "tern/sched/stream.h"
#include "tern/server/openai_bodies.h"
#include "tern/server/openai_request.h"
#include "tern/tokenizer/chat_template.h"

namespace tern::server {

struct Submission {
  std::shared_ptr<sched::Stream> stream;  // choice 0 (== streams[0])
  // One per choice (n > 1: each its own sequence; the others wait for the
  // first's prompt to be in the KV cache and share it through the prefix cache).
  std::vector<std::shared_ptr<sched::Stream>> streams;
  ResponseMeta meta;
  std::string echo;  // completions with echo: the prompt text to put first
  int prompt_tokens = 0;
  // Chat: split the output into reasoning and answer (ServerContext::split_reasoning);
  // in_reasoning: the prompt ended with the open tag, so the output starts inside it.
  bool split_reasoning = false;
  bool in_reasoning = false;
  // Chat with tools: how the answer's calls are written (the model's own
  // format; Hermes' when calls are forced and that format cannot be
  // constrained).
  ToolCallSyntax tool_syntax;
};

// Throws ApiError: 400 (template or prompt problems, context_length_exceeded
// for a prompt the context or the KV budget can never hold),
// 429 (queue full), 503 (shutting down). `notify` wakes the caller's session.
// `client` names the connection: the scheduler shares batch slots fairly between clients.
Submission submit_generation(ServerContext& ctx, const GenerationRequest& g, const std::string& rid,
                             const std::string& client, sched::Stream::Notify notify);

// submit_generation on the prep pool (the caller's coroutine resumes on its
// own executor).
awaitable<Submission> prepare_generation(ServerContext& ctx, const GenerationRequest& g,
                                         const std::string& rid, const std::string& client,
                                         sched::Stream::Notify notify);

// A chat request's conversation as the chat template takes it (kwargs points
// into the request).
struct ChatInput {
  std::vector<ChatMessage> messages;
  std::vector<ChatTool> tools;  // offered (tool_choice not "none")
  const nlohmann::ordered_json* kwargs = nullptr;
};
ChatInput chat_input(const GenerationRequest& g);

// The request's prompt as template text and input runs; a conversation the
// template refuses is a 400 naming 'messages'.
std::vector<TextSegment> chat_segments(const ChatTemplate& tmpl, const GenerationRequest& g,
                                       bool add_generation_prompt = true);

// How the served model writes tool calls (its chat template's format).
ToolCallSyntax tool_syntax(ServerContext& ctx);
// The parser's syntax for a chat template's call format.
ToolCallSyntax call_syntax(const ChatToolFormat& f);

// "chatcmpl-..." / "cmpl-..." for a request id.
std::string response_id(GenerationRequest::Kind kind, const std::string& rid);

int64_t unix_now();

}  // namespace tern::server
