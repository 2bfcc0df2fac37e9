#pragma once
// Parsing and validation of OpenAI request bodies (chat completions and
// completions), shared by the HTTP routes and the WebSocket protocol. Every
// problem becomes an ApiError (400) naming the field, in the words OpenAI uses.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tern/sampling/params.h"
#include "tern/sampling/tool_calls.h"
#include "tern/server/api_error.h"
#include "tern/vision/audio.h"
#include "tern/vision/image.h"

namespace tern::server {

// A call an assistant message made (conversation history).
struct MessageToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

// A picture of a stored conversation without its pixels: where it came
// from (a data: URL is the encoded picture itself) and its pixel hash, so it
// can be decoded again and checked to be the same picture.
struct ImageSource {
  std::shared_ptr<const std::string> url;
  Sha256Digest hash{};
};

struct Message {
  std::string role;  // system, developer, user, assistant, tool
  std::string content;
  std::vector<MessageToolCall> tool_calls{};  // assistant
  std::string tool_call_id{};                 // tool: the call this answers
  std::string reasoning_content{};            // assistant: its earlier thinking
  // The frames of the media markers in `content`, when the message keeps
  // them itself (a stored Responses conversation); chat keeps them in
  // GenerationRequest::images instead.
  std::vector<std::shared_ptr<const vision::Image>> images{};
  // The same pictures as sources (a stored conversation keeps only these;
  // images is filled again when a request continues it).
  std::vector<ImageSource> image_sources{};
  // The same for the audio markers' clips (a source's hash is the pcm_hash).
  std::vector<std::shared_ptr<const vision::AudioClip>> audio{};
  std::vector<ImageSource> audio_sources{};
};

// tool_choice: auto (the model decides; calls are parsed from its text), none
// (no tools offered), required (at least one call, decoding constrained),
// named (a call to `tool_choice_name`, constrained).
enum class ToolChoice : uint8_t { Auto, None, Required, Named };

struct GenerationRequest {
  enum class Kind : uint8_t { Chat, Completion };
  Kind kind = Kind::Chat;
  std::string model;                   // as sent; "<base>:<adapter>" picks a LoRA adapter
  std::string lora;                    // "lora" field: an adapter's name (empty: none)
  float lora_scale = 1.0f;             // "lora.scale"
  std::vector<Message> messages;       // Chat
  std::string prompt;                  // Completion given as text
  std::vector<int32_t> prompt_tokens;  // Completion given as token ids (then prompt is empty)
  bool echo = false;                   // Completion: prepend the prompt to the text
  SamplingParams params;               // validated
  bool max_tokens_given = false;       // false: params.max_tokens is the endpoint's default
  int n = 1;                           // choices, 1..kMaxChoices
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Chat: extra chat-template variables (chat_template_kwargs, and
  // reasoning_effort as llama.cpp passes it); null when none.
  nlohmann::ordered_json chat_template_kwargs;
  // speculative (tern's extension): at most this many guessed tokens per
  // verify for this request, 0 = no speculation; -1 = the server's policy.
  int spec_max_tokens = -1;
  // speculative.type: "auto" (empty), "ngram" or "draft" ("off" sets
  // spec_max_tokens to 0). "draft" needs a server with --draft-model.
  std::string spec_type;
  // Chat: Predicted Outputs (`prediction`: {"type": "content", "content"}):
  // the text the answer is expected to be close to ("" if none).
  std::string prediction;
  // Chat: the functions offered (see "Tool calling" in README.md).
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_name;     // ToolChoice::Named
  bool parallel_tool_calls = true;  // more than one call per reply
  // Tools are offered and their calls parsed from the output.
  bool uses_tools() const { return !tools.empty() && tool_choice != ToolChoice::None; }
  // Session key: the `user` field, or the X-Session-Id header (which wins).
  // Non-empty: the request's KV stays pinned after it ends (--session-ttl).
  std::string session;
  // Chat with media (--mmproj): the images and video frames, in the order of
  // the media markers in the messages' text (media_parts.h).
  std::vector<std::shared_ptr<const vision::Image>> images;
  // ... and the audio clips, in the order of the audio markers (kAudioMarker).
  std::vector<std::shared_ptr<const vision::AudioClip>> audio;
};

// Longest session key accepted (X-Session-Id, `user`).
inline constexpr size_t kMaxSessionKey = 256;

// Chat requests whose tool_choice forces a call: `params` constrained to one
// (or, with parallel_tool_calls, several) calls in `syntax` whose name is one
// of the allowed tools and whose arguments follow its parameters schema.
// Otherwise `params` unchanged.
SamplingParams tool_constrained_params(const GenerationRequest& g, const ToolCallSyntax& syntax);

// What a parser does with a field it does not know. Ignore (the default): the
// field is skipped and a warning is logged the first time the process sees
// its name (clients and SDKs add new fields all the time). Refuse: a 400
// naming it (`tern serve --strict-fields`). A field tern knows but cannot
// honour with the given value (best_of: 2, tools) is a 400 either way.
enum class UnknownFields : uint8_t { Ignore, Refuse };

// Records that an unknown field `name` was seen; true the first time for that
// name in this process (the caller then logs it). Thread-safe.
bool note_unknown_field(const std::string& name);

// Parses a request body; malformed JSON or a non-object is an ApiError.
nlohmann::json parse_json_body(std::string_view body);

// `body` is the request object. `extra_keys` are keys the caller handles
// itself (e.g. the WebSocket "type" and "id") and that are not unknown fields.
GenerationRequest parse_chat_request(const nlohmann::json& body,
                                     const std::vector<std::string>& extra_keys = {},
                                     UnknownFields unknown = UnknownFields::Ignore);
GenerationRequest parse_completion_request(const nlohmann::json& body,
                                           const std::vector<std::string>& extra_keys = {},
                                           UnknownFields unknown = UnknownFields::Ignore);

// Most choices one request may ask for (n).
inline constexpr int kMaxChoices = 16;

// Default max_tokens of /v1/completions when the request gives none (OpenAI's).
inline constexpr int kCompletionDefaultMaxTokens = 16;

}  // namespace tern::server
