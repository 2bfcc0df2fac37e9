#include "api_exchange.h"

namespace tern::server {

AnswerOptions chat_answer(ServerContext& ctx, const Submission& s, bool tools,
                          bool stream_arguments) {
  AnswerOptions o;
  o.split_reasoning = s.split_reasoning;
  o.in_reasoning = s.in_reasoning;
  if (tools) o.tools = s.tool_syntax;
  o.stream_arguments = stream_arguments;
  return o;
}

AnswerStream::AnswerStream(ApiExchange& api, const Submission& s, bool streaming)
    : renderer_(api.renderer(s)),
      options_(api.answer_options(s, streaming)),
      finish_(s.streams.size()),
      echo_(s.echo) {
  decoders_.reserve(s.streams.size());
  for (size_t i = 0; i < s.streams.size(); ++i) decoders_.emplace_back(options_);
}

std::string AnswerStream::open() {
  std::string out = renderer_->open();
  if (echo_.empty()) return out;
  sched::StreamChunk echo;
  echo.text = echo_;
  for (size_t i = 0; i < decoders_.size(); ++i) out += push(i, echo);
  return out;
}

std::string AnswerStream::push(size_t index, const sched::StreamChunk& c) {
  if (finish_[index] || c.empty()) return {};
  std::vector<AnswerEvent> events = decoders_[index].push(c.text);
  if (c.finish) {
    finish_[index] = *c.finish;
    for (AnswerEvent& e : decoders_[index].finish(*c.finish)) events.push_back(std::move(e));
  }
  return renderer_->render(index, c, events);
}

bool AnswerStream::all_ended() const {
  for (const auto& f : finish_)
    if (!f) return false;
  return true;
}

std::string AnswerStream::close() {
  std::vector<sched::Finish> f;
  f.reserve(finish_.size());
  for (const auto& x : finish_) f.push_back(*x);
  return renderer_->close(f);
}

const sched::Finish* AnswerStream::failed(std::span<const ChoiceOutput> c) const {
  for (const ChoiceOutput& o : c)
    if (o.finish.reason == sched::FinishReason::Error) return &o.finish;
  return nullptr;
}

nlohmann::json AnswerStream::body(std::vector<ChoiceOutput>& c) const {
  for (ChoiceOutput& o : c) o.answer = decode_answer(o.text, options_);
  return renderer_->body(c);
}

}  // namespace tern::server
