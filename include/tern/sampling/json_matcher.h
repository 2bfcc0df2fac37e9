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
#include <type_traits>
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

  // One open value. Plain data, no initializers (copied per trie edge and
  // compared bytewise): create with Frame{}, which puts every kind in its
  // Start phase. What phase, small_count, count and word hold depends on the
  // node's kind (and phase): the phase enums and accessors below (items(f),
  // key_node(f), utf8_left(f), ...) name each use.
  struct Frame {
    uint32_t node;         // the grammar node this value matches
    uint8_t phase;         // where in the node's syntax: a StringPhase, NumberPhase, ...
    uint8_t small_count;   // hex digits read, UTF-8 bytes left or fraction digits
    uint8_t negative;      // a number: it began with '-'
    uint8_t pad;           // unused, kept zero: no padding bytes to compare
    uint32_t count;        // bytes or code points, integer or exponent digits, items, properties
    uint32_t word;         // \u code unit, UTF-8 byte range, key-trie node or property
    uint64_t significand;  // a number: its digits so far (integer and fraction)
  };
  static_assert(sizeof(Frame) == 24 && std::has_unique_object_representations_v<Frame>,
                "Frame is compared with memcmp: it must have no padding bytes");
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
  // A frame's phase, by its node's kind: how much of the value's syntax has
  // been read (a literal needs none). Each starts at 0, the phase Frame{} gives.
  enum class StringPhase : uint8_t {
    Start,         // before '"'
    Body,          // between the quotes
    Escape,        // after '\'
    Hex,           // in \uXXXX: hex_digits(f) read so far, code_unit(f) their value
    Utf8,          // inside a multi-byte UTF-8 character: utf8_left(f), utf8_range(f)
    LowBackslash,  // after a high surrogate's \uXXXX: the low one's '\' must come
    LowU,          // ... then its 'u'
    LowHex,        // ... then its hex digits, as in Hex
  };
  enum class NumberPhase : uint8_t {
    Start,
    Minus,       // after '-'
    Zero,        // the integer part is "0"
    IntDigits,   // in the integer part
    Dot,         // after '.'
    FracDigits,  // in the fraction
    Exp,         // after 'e' or 'E'
    ExpSign,     // after the exponent's '+' or '-'
    ExpDigits,   // in the exponent
  };
  enum class ArrayPhase : uint8_t {
    Start,       // before '['
    Opened,      // after '['
    AfterItem,   // an item began (its frame is above while it is open)
    AfterComma,  // after ','
  };
  enum class ObjectPhase : uint8_t {
    Start,        // before '{'
    Opened,       // after '{'
    AfterValue,   // a value began (its frame is above while it is open)
    AfterComma,   // after ','
    InKey,        // in a declared key: key_node(f) is where it is in the key trie
    BeforeColon,  // the key ended: prop(f) is its property, kNone for an extra key
    InExtraKey,   // in an undeclared key: a String frame is above
    BeforeValue,  // after ':', prop(f) as in BeforeColon
  };
  static StringPhase string_phase(const Frame& f) { return StringPhase(f.phase); }
  static NumberPhase number_phase(const Frame& f) { return NumberPhase(f.phase); }
  static ArrayPhase array_phase(const Frame& f) { return ArrayPhase(f.phase); }
  static ObjectPhase object_phase(const Frame& f) { return ObjectPhase(f.phase); }
  static void set_phase(Frame& f, auto phase) { f.phase = uint8_t(phase); }

  // What the shared fields hold, by node kind (and phase); f is a Frame or a
  // const Frame, and each returns a reference into it.
  // Literal: the bytes matched so far.
  static auto& matched(auto& f) { return f.count; }
  // String: its length in code points; in Hex and LowHex the digits read and
  // their value; in Utf8 the continuation bytes still to come and the range
  // the next one must be in (lo | hi << 8).
  static auto& code_points(auto& f) { return f.count; }
  static auto& hex_digits(auto& f) { return f.small_count; }
  static auto& code_unit(auto& f) { return f.word; }
  static auto& utf8_left(auto& f) { return f.small_count; }
  static auto& utf8_range(auto& f) { return f.word; }
  // Number: the digits of its integer part, fraction and exponent. The
  // exponent takes over the integer's count, which is no longer needed then.
  static auto& int_digits(auto& f) { return f.count; }
  static auto& frac_digits(auto& f) { return f.small_count; }
  static auto& exp_digits(auto& f) { return f.count; }
  // Array: the items completed.
  static auto& items(auto& f) { return f.count; }
  // Object: the first declared property that may still come (those before it
  // came or were skipped); in InKey the key-trie node reached, then the key's
  // property (kNone for an extra key).
  static auto& next_prop(auto& f) { return f.count; }
  static auto& key_node(auto& f) { return f.word; }
  static auto& prop(auto& f) { return f.word; }

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
