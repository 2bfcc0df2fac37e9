#pragma once
// Splits a template's source into tokens: text (with jinja2's whitespace
// control already applied: `-` markers, trim_blocks, lstrip_blocks), tag
// delimiters, and the names, literals and operators inside tags.
#include <string>
#include <string_view>
#include <vector>

#include "tern/jinja/template.h"

namespace tern::jinja {

struct Token {
  enum class Type {
    Text,
    BlockBegin,
    BlockEnd,
    VarBegin,
    VarEnd,
    Name,
    String,
    Int,
    Float,
    Op,
    Eof
  };
  Type type;
  std::string value;  // text, name, operator, or a string literal's unescaped value
  int line;
};

std::vector<Token> lex(std::string_view source, const Options& options);

}  // namespace tern::jinja
