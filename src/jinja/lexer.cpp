// The template lexer (see lexer.h). Follows jinja2's lexer: text runs are cut
// at "{{", "{%" and "{#"; inside a tag, "}}" ends a variable only when the
// brackets are balanced.
#include "lexer.h"

#include <cstring>

namespace tern::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_name_start(char c) {
  return std::isalpha(uint8_t(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(uint8_t(c)) || c == '_';
}

std::string normalize_newlines(std::string_view src, bool keep_trailing_newline) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Appends the UTF-8 encoding of code point cp.
void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

class Lexer {
 public:
  Lexer(std::string src, const Options& o) : src_(std::move(src)), opt_(o) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = src_.find('{', pos_);
      while (tag != std::string::npos && tag + 1 < src_.size() &&
             std::strchr("{%#", src_[tag + 1]) == nullptr)
        tag = src_.find('{', tag + 1);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        text(src_.substr(pos_), false);
        pos_ = src_.size();
        break;
      }
      const char kind = src_[tag + 1];
      const char mod = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      std::string t = src_.substr(pos_, tag - pos_);
      const bool line_start = pos_ == 0 || src_[pos_ - 1] == '\n';
      if (mod == '-') {
        while (!t.empty() && is_space(t.back())) t.pop_back();
      } else if (mod != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t nl = t.rfind('\n');
        const size_t l = nl == std::string::npos ? 0 : nl + 1;
        if ((l > 0 || line_start) && t.find_first_not_of(" \t\v\f", l) == std::string::npos)
          t.resize(l);
      }
      text(t, true);
      advance_to(tag + 2 + ((mod == '-' || mod == '+') ? 1 : 0));
      if (kind == '#') {
        comment();
      } else {
        tag_body(kind == '{');
      }
    }
    out_.push_back({Token::Type::Eof, "", line_});
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw Error("template syntax error at line " + std::to_string(line_) + ": " + what);
  }

  void text(const std::string& t, bool counted_after) {
    if (!t.empty()) out_.push_back({Token::Type::Text, t, line_});
    (void)counted_after;
  }

  void advance_to(size_t p) {
    for (size_t i = pos_; i < p && i < src_.size(); ++i) line_ += src_[i] == '\n';
    pos_ = p;
  }

  // After a tag's end marker: `-` strips all following whitespace, trim_blocks one newline.
  void after_end(bool minus, bool plus, bool block) {
    if (minus) {
      size_t p = pos_;
      while (p < src_.size() && is_space(src_[p])) ++p;
      advance_to(p);
    } else if (block && !plus && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("unclosed comment");
    const bool minus = end > pos_ && src_[end - 1] == '-';
    const bool plus = end > pos_ && src_[end - 1] == '+';
    advance_to(end + 2);
    after_end(minus, plus, true);
  }

  void tag_body(bool variable) {
    out_.push_back({variable ? Token::Type::VarBegin : Token::Type::BlockBegin, "", line_});
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) fail(variable ? "unclosed '{{'" : "unclosed '{%'");
      const std::string_view rest = std::string_view(src_).substr(pos_);
      const std::string_view close = variable ? "}}" : "%}";
      const bool minus =
          rest.size() > 2 && (rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close;
      if (depth == 0 && (rest.starts_with(close) || minus)) {
        const char sign = minus ? rest[0] : '\0';
        out_.push_back({variable ? Token::Type::VarEnd : Token::Type::BlockEnd, "", line_});
        advance_to(pos_ + close.size() + (minus ? 1 : 0));
        after_end(sign == '-', sign == '+', !variable);
        return;
      }
      token(depth);
    }
  }

  void token(int& depth) {
    const char c = src_[pos_];
    if (c == '\'' || c == '"') return string_literal(c);
    if (std::isdigit(uint8_t(c))) return number();
    if (is_name_start(c)) {
      size_t e = pos_;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      out_.push_back({Token::Type::Name, src_.substr(pos_, e - pos_), line_});
      return advance_to(e);
    }
    static constexpr const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                           "]",  "{",  "}",  ",",  ".",  ":",  "|", "?"};
    for (const char* op : kOps) {
      if (src_.compare(pos_, std::strlen(op), op) != 0) continue;
      if (std::strchr("([{", op[0]) && op[1] == '\0') ++depth;
      if (std::strchr(")]}", op[0]) && op[1] == '\0' && --depth < 0)
        fail("unexpected '" + std::string(op) + "'");
      out_.push_back({Token::Type::Op, op, line_});
      return advance_to(pos_ + std::strlen(op));
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  void number() {
    size_t e = pos_;
    bool is_float = false;
    while (e < src_.size() && (std::isdigit(uint8_t(src_[e])) || src_[e] == '_')) ++e;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(uint8_t(src_[e + 1]))) {
      is_float = true;
      for (++e; e < src_.size() && (std::isdigit(uint8_t(src_[e])) || src_[e] == '_');) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t f = e + 1;
      if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
      if (f < src_.size() && std::isdigit(uint8_t(src_[f]))) {
        is_float = true;
        for (e = f; e < src_.size() && std::isdigit(uint8_t(src_[e]));) ++e;
      }
    }
    std::string v;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') v.push_back(src_[i]);
    out_.push_back({is_float ? Token::Type::Float : Token::Type::Int, v, line_});
    advance_to(e);
  }

  uint32_t hex(size_t at, int n) {
    if (at + size_t(n) > src_.size()) fail("bad escape in string literal");
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char h = src_[at + size_t(i)];
      if (!std::isxdigit(uint8_t(h))) fail("bad escape in string literal");
      v = v * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
    }
    return v;
  }

  // Python's string escapes.
  void string_literal(char quote) {
    std::string v;
    size_t p = pos_ + 1;
    for (;; ++p) {
      if (p >= src_.size()) fail("unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\' || p + 1 >= src_.size()) {
        v.push_back(c);
        continue;
      }
      const char e = src_[++p];
      switch (e) {
        case 'n':
          v.push_back('\n');
          break;
        case 't':
          v.push_back('\t');
          break;
        case 'r':
          v.push_back('\r');
          break;
        case 'b':
          v.push_back('\b');
          break;
        case 'f':
          v.push_back('\f');
          break;
        case 'v':
          v.push_back('\v');
          break;
        case 'a':
          v.push_back('\a');
          break;
        case '0':
          v.push_back('\0');
          break;
        case '\\':
        case '\'':
        case '"':
          v.push_back(e);
          break;
        case '\n':
          break;
        case 'x':
          put_utf8(v, hex(p + 1, 2));
          p += 2;
          break;
        case 'u':
          put_utf8(v, hex(p + 1, 4));
          p += 4;
          break;
        case 'U':
          put_utf8(v, hex(p + 1, 8) & 0x1FFFFF);
          p += 8;
          break;
        default:
          v.push_back('\\');
          v.push_back(e);
      }
    }
    out_.push_back({Token::Type::String, v, line_});
    advance_to(p + 1);
  }

  std::string src_;
  const Options& opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const Options& options) {
  return Lexer(normalize_newlines(source, options.keep_trailing_newline), options).run();
}

}  // namespace tern::jinja
