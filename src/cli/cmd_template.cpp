// tern template: the prompt a model's chat template makes of a conversation,
// without loading its weights. The conversation is a JSON file shaped like an
// OpenAI chat request (messages, tools, chat_template_kwargs,
// add_generation_prompt); --bench N times N renders (bench/RESULTS.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {
namespace {

using json = nlohmann::ordered_json;

struct TemplateOptions {
  std::string model, template_file, template_name, conversation;
  bool no_generation_prompt = false;
  int bench = 0;
};

std::string read_file(const std::string& path, uintmax_t limit, const char* what) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument(std::string(what) + " " + path + ": " + ec.message());
  if (size > limit)
    throw InvalidArgument(std::string(what) + " " + path + ": " + std::to_string(size) +
                          " bytes, more than " + std::to_string(limit));
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string text_of(const json& v, const std::string& where) {
  if (v.is_null()) return {};
  if (!v.is_string()) throw InvalidArgument(where + " must be a string");
  return v.get<std::string>();
}

std::vector<ChatMessage> messages_of(const json& conv) {
  if (!conv.contains("messages") || !conv["messages"].is_array())
    throw InvalidArgument("the conversation needs a \"messages\" array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < conv["messages"].size(); ++i) {
    const json& m = conv["messages"][i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw InvalidArgument(where + " must be an object");
    ChatMessage& c = out.emplace_back();
    c.role = text_of(m.value("role", json()), where + ".role");
    c.content = text_of(m.value("content", json()), where + ".content");
    c.tool_call_id = text_of(m.value("tool_call_id", json()), where + ".tool_call_id");
    c.reasoning_content =
        text_of(m.value("reasoning_content", json()), where + ".reasoning_content");
    for (const json& t : m.value("tool_calls", json::array())) {
      const json f = t.value("function", json::object());
      const json args = f.value("arguments", json("{}"));
      c.tool_calls.push_back(
          {text_of(f.value("name", json()), where + ".tool_calls[].function.name"),
           args.is_string() ? args.get<std::string>() : args.dump(),
           text_of(t.value("id", json()), where + ".tool_calls[].id")});
    }
  }
  return out;
}

std::vector<ChatTool> tools_of(const json& conv) {
  std::vector<ChatTool> out;
  for (const json& t : conv.value("tools", json::array())) {
    const json f = t.value("function", json::object());
    out.push_back({text_of(f.value("name", json()), "tools[].function.name"),
                   text_of(f.value("description", json()), "tools[].function.description"),
                   f.value("parameters", json::object()).dump()});
  }
  return out;
}

ChatTemplate template_of(const TemplateOptions& o) {
  if (!o.template_name.empty()) return ChatTemplate::of_name(o.template_name);
  const gguf::GgufFile f = gguf::GgufFile::open(o.model.empty() ? default_model_path() : o.model);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  if (o.template_file.empty()) return ChatTemplate::from_gguf(f, tok);
  return ChatTemplate::from_jinja(read_file(o.template_file, 1 << 20, "--chat-template-file"),
                                  ChatTemplate::tokens_of(tok));
}

void run(const TemplateOptions& o) {
  json conv = {{"messages", json::array({json{{"role", "user"}, {"content", "Hello!"}}})}};
  if (!o.conversation.empty()) {
    conv = json::parse(read_file(o.conversation, 16 << 20, "--conversation"), nullptr, false);
    if (conv.is_discarded() || !conv.is_object())
      throw InvalidArgument("--conversation " + o.conversation + ": not a JSON object");
  }
  const ChatTemplate t = template_of(o);
  const std::vector<ChatMessage> msgs = messages_of(conv);
  const std::vector<ChatTool> tools = tools_of(conv);
  const json* kwargs =
      conv.contains("chat_template_kwargs") ? &conv["chat_template_kwargs"] : nullptr;
  const bool gen = !o.no_generation_prompt && conv.value("add_generation_prompt", true);
  const std::string prompt = t.apply(msgs, gen, tools, kwargs);
  if (o.bench <= 0) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return;
  }
  std::vector<double> us;
  us.reserve(size_t(o.bench));
  for (int i = 0; i < o.bench; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string p = t.apply(msgs, gen, tools, kwargs);
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (p.size() != prompt.size()) throw Error("the template rendered differently on a repeat");
  }
  std::sort(us.begin(), us.end());
  std::printf(
      "template %s: %zu messages, %zu tools, %zu prompt bytes; render median %.1f us, "
      "p90 %.1f us, best %.1f us over %d\n",
      std::string(t.name()).c_str(), msgs.size(), tools.size(), prompt.size(), us[us.size() / 2],
      us[us.size() * 9 / 10], us.front(), o.bench);
}

}  // namespace

void add_template_command(CLI::App& app) {
  auto o = std::make_shared<TemplateOptions>();
  auto* cmd = app.add_subcommand(
      "template",
      "print the prompt the model's chat template makes of a conversation (no weights loaded)");
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file whose template is used (default: SmolLM2)");
  auto* file = cmd->add_option("--chat-template-file", o->template_file,
                               "Jinja template instead of the model's");
  cmd->add_option("--chat-template", o->template_name, "a built-in format")
      ->check(CLI::IsMember({"chatml", "llama3", "gemma", "llama2", "smolvlm"}))
      ->excludes(file);
  cmd->add_option("--conversation", o->conversation,
                  "JSON file shaped like a chat request: messages, tools, chat_template_kwargs, "
                  "add_generation_prompt (default: one user message)");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "leave the assistant's turn unopened");
  cmd->add_option("--bench", o->bench, "render N times and print the timing instead")
      ->check(CLI::Range(0, 10'000'000));
  cmd->callback([o] { run(*o); });
}

}  // namespace tern::cli
