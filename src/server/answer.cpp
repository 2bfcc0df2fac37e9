#include "answer.h"

namespace tern::server {

using Kind = AnswerEvent::Kind;

namespace {

AnswerEvent event(Kind kind, std::string text, size_t call = 0, std::string name = {}) {
  AnswerEvent e;
  e.kind = kind;
  e.text = std::move(text);
  e.call = call;
  e.name = std::move(name);
  return e;
}

}  // namespace

AnswerDecoder::AnswerDecoder(const AnswerOptions& o) {
  if (o.split_reasoning) split_.emplace(o.in_reasoning);
  if (o.tools) tools_.emplace(*o.tools, o.stream_arguments);
}

std::vector<AnswerEvent> AnswerDecoder::push(std::string_view text) {
  std::vector<AnswerEvent> out;
  if (!split_) {
    answer_text(text, out);
    return out;
  }
  // The splitter gives a piece's reasoning before its answer.
  ReasoningSplitter::Parts p = split_->push(text);
  if (!p.reasoning.empty()) out.push_back(event(Kind::Reasoning, std::move(p.reasoning)));
  answer_text(p.content, out);
  return out;
}

std::vector<AnswerEvent> AnswerDecoder::finish(const sched::Finish& f) {
  std::vector<AnswerEvent> out;
  if (f.reason != sched::FinishReason::Error) {
    if (split_) {
      ReasoningSplitter::Parts p = split_->flush();
      if (!p.reasoning.empty()) out.push_back(event(Kind::Reasoning, std::move(p.reasoning)));
      answer_text(p.content, out);
    }
    if (tools_) tool_parts(tools_->flush(), out);
  }
  AnswerEvent end = event(Kind::End, {});
  end.finish = f;
  end.calls = calls_;
  out.push_back(std::move(end));
  return out;
}

void AnswerDecoder::answer_text(std::string_view text, std::vector<AnswerEvent>& out) {
  if (text.empty()) return;
  if (tools_) {
    tool_parts(tools_->push(text), out);
  } else {
    out.push_back(event(Kind::Content, std::string(text)));
  }
}

// The parser reports a piece's content before its calls.
void AnswerDecoder::tool_parts(ToolCallParser::Parts p, std::vector<AnswerEvent>& out) {
  if (!p.content.empty()) out.push_back(event(Kind::Content, std::move(p.content)));
  for (ToolCallParser::CallDelta& d : p.deltas) {
    if (!d.name.empty()) out.push_back(event(Kind::CallStart, {}, d.index, std::move(d.name)));
    if (!d.arguments.empty())
      out.push_back(event(Kind::CallArguments, std::move(d.arguments), d.index));
  }
  for (ParsedToolCall& c : p.calls)
    out.push_back(event(Kind::Call, std::move(c.arguments), calls_++, std::move(c.name)));
}

void Answer::add(const AnswerEvent& e) {
  switch (e.kind) {
    case Kind::Reasoning:
      reasoning += e.text;
      break;
    case Kind::Content:
      content += e.text;
      break;
    case Kind::Call:
      calls.push_back({e.name, e.text});
      break;
    case Kind::CallStart:
    case Kind::CallArguments:
    case Kind::End:
      break;
  }
}

Answer decode_answer(std::string_view text, AnswerOptions o) {
  o.stream_arguments = false;
  AnswerDecoder d(o);
  Answer a;
  a.add(d.push(text));
  a.add(d.finish(sched::Finish{}));
  return a;
}

}  // namespace tern::server
