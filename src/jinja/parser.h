#pragma once
// Builds the syntax tree from tokens (see ast.h). Nesting deeper than
// Options::max_depth, an unknown tag and a malformed expression are Errors
// naming the line.
#include <vector>

#include "ast.h"
#include "lexer.h"

namespace tern::jinja {

Program parse_tokens(std::vector<Token> tokens, const Options& options);

}  // namespace tern::jinja
