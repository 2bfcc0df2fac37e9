#pragma once
// A Jinja template engine for chat templates: the subset of Jinja2 that
// Hugging Face chat templates use, rendered as transformers and llama.cpp's
// server render them (trim_blocks, lstrip_blocks, loop controls,
// {% generation %}, tojson with ensure_ascii off, raise_exception,
// strftime_now). See src/jinja/README.md for the supported features.
//
// Templates come from downloaded model files, so they are untrusted: parsing
// and rendering are bounded (nesting depth, steps, output size), do no I/O,
// and every failure is a jinja::Error naming the construct and line.
#include <cstdint>
#include <ctime>
#include <memory>
#include <string_view>

#include "tern/jinja/str.h"
#include "tern/jinja/value.h"

namespace tern::jinja {

struct Options {
  bool trim_blocks = true;              // drop the newline after a block tag
  bool lstrip_blocks = true;            // drop spaces before a block tag on its line
  bool keep_trailing_newline = false;   // jinja2's default: one trailing "\n" dropped
  size_t max_output = size_t(8) << 20;  // bytes of output, and of any one string
  int64_t max_steps = 2'000'000;        // statements, loop iterations and calls
  int max_depth = 128;                  // nesting of expressions, blocks and macro calls
  std::time_t now = 0;                  // what strftime_now() formats (0: the current time)
};

struct Program;

class Template {
 public:
  // Parses `source`; throws Error (with the line) on a syntax error or an
  // unsupported tag.
  static Template parse(std::string_view source, Options options = {});

  // Renders with `context` as the template's variables (messages, tools,
  // bos_token, add_generation_prompt, ...). Throws Error.
  Str render(const Object& context) const;

 private:
  Template(std::shared_ptr<const Program> p, Options o) : program_(std::move(p)), options_(o) {}
  std::shared_ptr<const Program> program_;
  Options options_;
};

}  // namespace tern::jinja
