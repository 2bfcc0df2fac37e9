#pragma once
// Incremental matcher for a JsonGrammar: a pushdown automaton over bytes.
//
// The state is a small set of stacks (more than one only while anyOf/oneOf
// alternatives are still ambiguous); each stack holds one frame per open
// value (object, array, string, number, literal), innermost last. advance()
// feeds bytes; a byte no stack accepts is refused and leaves the state
// unchanged. The state is a plain value: copying a matcher is the way to try
// a continuation (TokenTrie does it per trie edge, into reused buffers).
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tern/sampling/json_schema.h"

namespace tern {

class JsonMatcher {
 public:
  static constexpr int kMaxDepth = 24;      // nesting depth of the output
  static constexpr size_t kMaxStacks = 32;  // live alternatives kept

  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> g);

  // Feeds bytes; returns false (state unchanged) when they cannot continue
  // any output the grammar allows.
  bool advance(std::string_view bytes);
  // out = this state after one more byte; false when the byte is refused (out
  // is then unspecified). Reuses out's buffers: no allocation once warm.
  bool advance_into(uint8_t byte, JsonMatcher& out) const;
  // The bytes so far are a complete value of the grammar.
  bool accepts_end() const;
  bool dead() const { return stacks_.empty(); }
  // How many plain ASCII characters (0x20..0x7F but '"' and '\\') may follow
  // while the state stays inside one string: > 0 only when the state is a
  // single stack inside a string's body. TokenTrie uses it to accept whole
  // subtrees of plain tokens without walking them.
  uint32_t plain_string_room() const;
  void reset();

  // Plain data, no initializers (copied per trie edge): create with Frame{}.
  struct Frame {
    uint32_t node;
    uint8_t phase;
    uint8_t aux;  // hex digits / UTF-8 bytes left / fraction digits
    uint8_t neg;
    uint8_t pad;
    uint32_t a;  // items, code points, next property, digits
    uint32_t b;  // key-trie node, chosen property, \u value, UTF-8 range
    uint64_t m;  // number: its digits so far (integer and fraction)
  };
  struct Stack {
    int depth = 0;
    bool started = false;  // the root value has begun (depth 0 then means done)
    Frame f[kMaxDepth];
    Stack() = default;
    Stack(const Stack& o) { *this = o; }
    Stack& operator=(const Stack& o);
    bool operator==(const Stack& o) const;
  };

 private:
  void feed(Stack s, uint8_t c, std::vector<Stack>& out) const;
  void begin_value(Stack s, uint32_t node, uint8_t c, std::vector<Stack>& out, int hops) const;
  void value_done(Stack& s, std::vector<Stack>& out, int refeed) const;
  bool number_step(Frame& f, const JsonNode& n, uint8_t c) const;
  bool number_can_end(const Frame& f, const JsonNode& n) const;
  bool number_feasible(const Frame& f, const JsonNode& n) const;
  bool string_step(Frame& f, const JsonNode& n, uint8_t c, bool* closed) const;
  bool key_candidate(const JsonNode& n, const Frame& f, uint32_t trie_node) const;
  bool extra_allowed(const JsonNode& n, const Frame& f) const;
  void array_byte(Stack& s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const;
  void object_byte(Stack& s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const;
  void object_key_byte(Stack& s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const;

  std::shared_ptr<const JsonGrammar> g_;
  std::vector<Stack> stacks_;
};

}  // namespace tern
