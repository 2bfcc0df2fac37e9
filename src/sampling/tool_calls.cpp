// Tool-call schemas and the output parser (see tool_calls.h).
#include "tern/sampling/tool_calls.h"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "tern/core/json_scan.h"
#include "tern/sampling/json_schema.h"

namespace tern {
namespace {

using json = nlohmann::json;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Bytes at the end of `s` that are a proper prefix of `tag` (they may still become it).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// `marker` in text from `from`, spaces and newlines between its tags
// ("</a>\n<b>" matches "</a><b>" and the reverse) and around it ignored:
// [begin, end) of the match, or npos.
std::pair<size_t, size_t> find_loose(std::string_view text, std::string_view marker, size_t from) {
  std::vector<std::string_view> pieces;
  marker = trim(marker);
  while (!marker.empty()) {
    size_t cut = marker.find('>');
    while (cut != std::string_view::npos && cut + 1 < marker.size() &&
           trim(marker.substr(cut + 1)).front() != '<')
      cut = marker.find('>', cut + 1);
    const size_t n = cut == std::string_view::npos ? marker.size() : cut + 1;
    pieces.push_back(marker.substr(0, n));
    marker = trim(marker.substr(n));
  }
  if (pieces.empty()) return {std::string_view::npos, std::string_view::npos};
  for (size_t at = text.find(pieces[0], from); at != std::string_view::npos;
       at = text.find(pieces[0], at + 1)) {
    size_t end = at + pieces[0].size();
    bool ok = true;
    for (size_t i = 1; ok && i < pieces.size(); ++i) {
      while (end < text.size() && is_space(text[end])) ++end;
      ok = text.substr(end, pieces[i].size()) == pieces[i];
      end += pieces[i].size();
    }
    if (ok) return {at, end};
  }
  return {std::string_view::npos, std::string_view::npos};
}

}  // namespace

std::string tool_call_schema(std::span<const ToolSpec> tools, std::string_view args_key) {
  json alts = json::array();
  for (const ToolSpec& t : tools) {
    json params = json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
    if (params.is_discarded())
      throw SchemaError("", "the parameters of tool '" + t.name + "' are not valid JSON");
    const std::string key(args_key);
    alts.push_back(json{{"type", "object"},
                        {"properties", {{"name", {{"const", t.name}}}, {key, std::move(params)}}},
                        {"required", {"name", key}},
                        {"additionalProperties", false}});
  }
  if (alts.size() == 1) return alts[0].dump();
  return json{{"anyOf", std::move(alts)}}.dump();
}

bool ToolCallParser::parse_call(std::string_view body, ParsedToolCall& out) {
  const json j = json::parse(trim(body), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  json a = args == j.end() ? json::object() : *args;
  if (a.is_string()) a = json::parse(a.get<std::string>(), nullptr, false);  // already encoded
  if (!a.is_object()) return false;
  out.name = name->get<std::string>();
  out.arguments = a.dump();
  return true;
}

bool ToolCallParser::parse_body(std::string_view body, std::vector<ParsedToolCall>& calls) const {
  using Form = ToolCallSyntax::Form;
  ParsedToolCall c;
  switch (syntax_.form) {
    case Form::Object: {
      if (parse_call(body, c)) {
        calls.push_back(std::move(c));
        return true;
      }
      // Several objects in one tag, one after another (MiniMax-M1).
      std::vector<ParsedToolCall> out;
      for (size_t at = 0; !trim(body.substr(at)).empty();) {
        const size_t end = json_container_end(body, at);
        if (end == std::string_view::npos || !parse_call(body.substr(at, end - at), c))
          return false;
        out.push_back(std::move(c));
        at = end;
      }
      if (out.empty()) return false;
      calls.insert(calls.end(), out.begin(), out.end());
      return true;
    }
    case Form::List: {
      const json j = json::parse(trim(body), nullptr, /*allow_exceptions=*/false);
      if (!j.is_array() || j.empty()) return false;
      std::vector<ParsedToolCall> out;
      for (const json& x : j) {
        if (!parse_call(x.dump(), c)) return false;
        out.push_back(std::move(c));
      }
      calls.insert(calls.end(), out.begin(), out.end());
      return true;
    }
    case Form::Named: {
      const size_t sep = body.find(syntax_.name_sep);
      if (syntax_.name_sep.empty() || sep == std::string_view::npos) return false;
      const std::string_view name = trim(body.substr(0, sep));
      if (name.empty() || name.find_first_of(" \t\r\n{}\"") != std::string_view::npos) return false;
      json a = json::parse(trim(body.substr(sep + syntax_.name_sep.size())), nullptr, false);
      if (!a.is_object()) return false;
      calls.push_back({std::string(name), a.dump()});
      return true;
    }
    case Form::Xml:
      return parse_xml_call(body, calls);
  }
  return false;
}

// Xml form: NAME [name_sep] (key_open KEY key_close VALUE value_close)*, the
// markers found with the spaces around them ignored.
bool ToolCallParser::parse_xml_call(std::string_view body,
                                    std::vector<ParsedToolCall>& calls) const {
  if (trim(syntax_.key_open).empty() || trim(syntax_.key_close).empty() ||
      trim(syntax_.value_close).empty())
    return false;
  const size_t first = find_loose(body, syntax_.key_open, 0).first;
  size_t name_end = trim(syntax_.name_sep).empty() ? std::string_view::npos
                                                   : find_loose(body, syntax_.name_sep, 0).first;
  if (name_end == std::string_view::npos || name_end > first)
    name_end = std::min(first, body.size());
  const std::string_view name = trim(body.substr(0, name_end));
  if (name.empty() || name.find_first_of(" \t\r\n{}\"<>") != std::string_view::npos) return false;
  json args = json::object();
  for (size_t at = first; at != std::string_view::npos;) {
    const size_t ks = find_loose(body, syntax_.key_open, at).second;
    auto [kc, vs] = find_loose(body, syntax_.key_close, ks);
    // A key closed by a quote and attributes (DeepSeek's `" string="true">`,
    // which says "false" for other types): the quote, then through the '>'.
    const std::string_view key_close = trim(syntax_.key_close);
    if (key_close.size() > 2 && key_close.front() == '"' && key_close.back() == '>') {
      kc = body.find('"', ks);
      const size_t gt = kc == std::string_view::npos ? kc : body.find('>', kc);
      vs = gt == std::string_view::npos ? gt : gt + 1;
      if (vs == std::string_view::npos) kc = vs;
    }
    if (kc == std::string_view::npos) return false;
    const std::string key(trim(body.substr(ks, kc - ks)));
    const auto [vc, next] = find_loose(body, syntax_.value_close, vs);
    if (key.empty() || vc == std::string_view::npos) return false;
    const std::string_view value = trim(body.substr(vs, vc - vs));
    const json typed = json::parse(value, nullptr, /*allow_exceptions=*/false);
    args[key] = typed.is_discarded() || typed.is_string() ? json(std::string(value)) : typed;
    at = find_loose(body, syntax_.key_open, next).first;
  }
  calls.push_back({std::string(name), args.dump()});
  return true;
}

size_t ToolCallParser::call_end() const {
  if (!syntax_.close.empty()) return buf_.find(syntax_.close);
  if (syntax_.form == ToolCallSyntax::Form::List) return json_container_end(buf_, 0);
  const size_t sep = buf_.find(syntax_.name_sep);
  if (sep == std::string::npos) return std::string::npos;
  return json_container_end(buf_, sep + syntax_.name_sep.size());
}

void ToolCallParser::emit_content(std::string_view s, Parts& out) {
  if (after_call_) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    if (s.empty()) return;
    after_call_ = false;
  }
  out.content.append(s);
}

void ToolCallParser::add_call(ParsedToolCall c, Parts& out) {
  if (stream_ && args_sent_ == 0) out.deltas.push_back({calls_seen_, c.name, c.arguments});
  out.calls.push_back(std::move(c));
  ++calls_seen_;
  after_call_ = true;
  args_at_ = args_sent_ = 0;
}

// While a call is written: once its head {"name": "f", "arguments": is in,
// its name goes out, then its arguments as they grow, minus a tail that may
// still turn out to be the call's own closing brace or tag.
void ToolCallParser::stream_open_call(Parts& out) {
  if (args_sent_ == 0) {
    size_t i = 0;
    auto ws = [&] {
      while (i < buf_.size() && is_space(buf_[i])) ++i;
    };
    auto lit = [&](std::string_view s) {
      ws();
      if (buf_.compare(i, s.size(), s) != 0) return false;
      i += s.size();
      return true;
    };
    if (!lit("{") || !lit("\"name\"") || !lit(":") || !lit("\"")) return;
    const size_t name_end = buf_.find('"', i);
    if (name_end == std::string::npos) return;
    const std::string name = buf_.substr(i, name_end - i);
    if (name.empty() || name.find('\\') != std::string::npos) return;
    i = name_end + 1;
    if (!lit(",") || !(lit("\"" + syntax_.args_key + "\"")) || !lit(":")) return;
    ws();
    if (i >= buf_.size()) return;
    out.deltas.push_back({calls_seen_, name, ""});
    streamed_name_ = name;
    args_at_ = args_sent_ = i;
  }
  size_t end = buf_.size() - partial_tag_suffix(buf_, syntax_.close);
  while (end > args_sent_ && (is_space(buf_[end - 1]) || buf_[end - 1] == '}')) --end;
  if (end > args_sent_) {
    out.deltas.push_back({calls_seen_, "", buf_.substr(args_sent_, end - args_sent_)});
    args_sent_ = end;
  }
}

// The closing tag of a streamed call: the rest of its arguments, up to the
// object's own closing brace.
void ToolCallParser::finish_streamed_call(std::string_view body, Parts& out) {
  size_t end = body.size();
  while (end > args_at_ && is_space(body[end - 1])) --end;
  if (end > args_at_ && body[end - 1] == '}') --end;  // the call object's brace
  while (end > args_at_ && is_space(body[end - 1])) --end;
  if (end > args_sent_)
    out.deltas.push_back({calls_seen_, "", std::string(body.substr(args_sent_, end - args_sent_))});
  ParsedToolCall c;
  if (!parse_call(body, c)) {  // already announced: keep what was written
    c.name = streamed_name_;
    c.arguments = std::string(body.substr(args_at_, end - args_at_));
  }
  out.calls.push_back(std::move(c));
  ++calls_seen_;
  after_call_ = true;
  args_at_ = args_sent_ = 0;
}

// Tagged syntax: text up to an opening tag is content; a call ends at the
// closing tag (or, without one, where its JSON ends). A wrapper around the
// calls (wrap_open / wrap_close) is dropped.
void ToolCallParser::push_tagged(Parts& out) {
  const std::string& wrap_open = syntax_.wrap_open;
  const std::string& wrap_close = syntax_.wrap_close;
  for (;;) {
    if (state_ == State::Call) {
      const size_t end = call_end();
      if (end == std::string::npos) {
        if (stream_ && syntax_.form == ToolCallSyntax::Form::Object) stream_open_call(out);
        return;
      }
      const std::string_view body = std::string_view(buf_).substr(0, end);
      std::vector<ParsedToolCall> calls;
      if (args_sent_ > 0) {
        finish_streamed_call(body, out);
      } else if (parse_body(body, calls)) {
        for (auto& c : calls) add_call(std::move(c), out);
      } else {
        emit_content(syntax_.open + std::string(body) + syntax_.close, out);
      }
      const bool closed = !syntax_.close.empty() && end < buf_.size();
      buf_.erase(0, end + (closed ? syntax_.close.size() : 0));
      state_ = State::Text;
      continue;
    }
    // Right after a call: the wrapper's end is not content.
    if (after_call_ && !wrap_close.empty()) {
      const std::string_view t = trim(buf_);
      if (t.starts_with(wrap_close)) {
        buf_.erase(0, buf_.find(wrap_close) + wrap_close.size());
        continue;
      }
      if (!t.empty() && std::string_view(wrap_close).starts_with(t)) return;  // maybe it
    }
    size_t at = buf_.find(syntax_.open);
    size_t skip = syntax_.open.size();
    if (!wrap_open.empty()) {
      // The wrapper's start counts when a call's opening tag follows it.
      const size_t w = buf_.find(wrap_open);
      if (w != std::string::npos && (at == std::string::npos || w < at)) {
        const std::string_view rest = trim(std::string_view(buf_).substr(w + wrap_open.size()));
        if (rest.size() < syntax_.open.size() && std::string_view(syntax_.open).starts_with(rest)) {
          emit_content(std::string_view(buf_).substr(0, w), out);
          buf_.erase(0, w);
          return;  // not decided yet
        }
        if (rest.starts_with(syntax_.open)) {
          at = w;
          skip = buf_.find(syntax_.open, w + wrap_open.size()) + syntax_.open.size() - w;
        }
      }
    }
    if (at != std::string::npos) {
      emit_content(std::string_view(buf_).substr(0, at), out);
      buf_.erase(0, at + skip);
      state_ = State::Call;
      continue;
    }
    size_t keep = partial_tag_suffix(buf_, syntax_.open);
    if (!wrap_open.empty()) keep = std::max(keep, partial_tag_suffix(buf_, wrap_open));
    emit_content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
    buf_.erase(0, buf_.size() - keep);
    return;
  }
}

ToolCallParser::Parts ToolCallParser::push(std::string_view text) {
  Parts out;
  buf_.append(text);
  if (syntax_.tagged()) {
    push_tagged(out);
    return out;
  }
  // Bare syntax: a reply whose first visible byte is '{' is held whole.
  if (state_ == State::Start) {
    const std::string_view t = trim(buf_);
    if (t.empty()) return out;
    state_ = t.front() == '{' ? State::Bare : State::Text;
  }
  if (state_ == State::Text) {
    emit_content(buf_, out);
    buf_.clear();
  }
  return out;
}

ToolCallParser::Parts ToolCallParser::flush() {
  Parts out;
  if (state_ == State::Bare) {
    // One object, or several separated by ';' (Llama 3.2's parallel form).
    std::vector<ParsedToolCall> calls;
    bool ok = true;
    size_t from = 0;
    const std::string_view all = buf_;
    while (ok && from <= all.size()) {
      size_t semi = all.find(';', from);
      ParsedToolCall c;
      // A ';' inside a string breaks the split: try the whole rest first.
      if (parse_call(all.substr(from), c)) {
        calls.push_back(std::move(c));
        break;
      }
      if (semi == std::string_view::npos) ok = false;
      while (ok && !parse_call(all.substr(from, semi - from), c)) {
        semi = all.find(';', semi + 1);
        if (semi == std::string_view::npos) ok = false;
      }
      if (!ok) break;
      calls.push_back(std::move(c));
      from = semi + 1;
    }
    if (ok) {
      for (auto& c : calls) add_call(std::move(c), out);
    } else {
      emit_content(buf_, out);
    }
  } else if (state_ == State::Call) {
    // An unterminated call (the output ended first): a call if its body is complete.
    std::vector<ParsedToolCall> calls;
    if (args_sent_ > 0) {
      finish_streamed_call(buf_, out);
    } else if (parse_body(buf_, calls)) {
      for (auto& c : calls) add_call(std::move(c), out);
    } else {
      emit_content(syntax_.open + buf_, out);
    }
  } else {
    emit_content(buf_, out);
  }
  buf_.clear();
  state_ = State::Text;
  return out;
}

}  // namespace tern
