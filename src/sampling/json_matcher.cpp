// The byte-level pushdown automaton behind JsonMatcher.
#include "tern/sampling/json_matcher.h"

#include <algorithm>
#include <cstring>

namespace tern {
namespace {

using Kind = JsonNode::Kind;
constexpr int kMaxDigits = 15;

const double kPow10[] = {1e0, 1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                         1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17};

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// [a, b] (ends included when *_in) meets the node's range?
bool overlaps(double a, bool a_in, double b, bool b_in, const JsonNode& n) {
  const bool lo_in = !n.lo_excl, hi_in = !n.hi_excl;
  const double L = std::max(a, n.lo), U = std::min(b, n.hi);
  const bool L_in = a > n.lo ? a_in : a < n.lo ? lo_in : (a_in && lo_in);
  const bool U_in = b < n.hi ? b_in : b > n.hi ? hi_in : (b_in && hi_in);
  return L < U || (L == U && L_in && U_in);
}

// Magnitudes [x1, x2) (or [x1, x2] when closed) with the sign applied.
bool magnitudes_overlap(bool neg, double x1, double x2, bool closed, const JsonNode& n) {
  if (neg) return overlaps(-x2, closed, -x1, true, n);
  return overlaps(x1, true, x2, closed, n);
}

// A UTF-8 lead byte: how many continuation bytes follow and the range of the
// next one (lo | hi << 8), refusing overlong forms, surrogates and > U+10FFFF.
bool utf8_lead(uint8_t c, uint32_t* left, uint32_t* range) {
  uint32_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    *left = 1;
  else if (c == 0xE0)
    *left = 2, lo = 0xA0;
  else if (c == 0xED)
    *left = 2, hi = 0x9F;
  else if (c >= 0xE1 && c <= 0xEF)
    *left = 2;
  else if (c == 0xF0)
    *left = 3, lo = 0x90;
  else if (c == 0xF4)
    *left = 3, hi = 0x8F;
  else if (c >= 0xF1 && c <= 0xF3)
    *left = 3;
  else
    return false;
  *range = lo | hi << 8;
  return true;
}

}  // namespace

JsonMatcher::Stack& JsonMatcher::Stack::operator=(const Stack& o) {
  depth = o.depth;
  started = o.started;
  std::memcpy(f, o.f, sizeof(Frame) * size_t(depth));
  return *this;
}

bool JsonMatcher::Stack::operator==(const Stack& o) const {
  return depth == o.depth && started == o.started &&
         std::memcmp(f, o.f, sizeof(Frame) * size_t(depth)) == 0;
}

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> g) : g_(std::move(g)) {
  reset();
}

void JsonMatcher::reset() {
  stacks_.assign(1, Stack{});
}

bool JsonMatcher::advance(std::string_view bytes) {
  JsonMatcher next = *this, tmp = *this;
  for (char c : bytes) {
    if (!next.advance_into(uint8_t(c), tmp)) return false;
    std::swap(next.stacks_, tmp.stacks_);
  }
  stacks_ = std::move(next.stacks_);
  return true;
}

bool JsonMatcher::advance_into(uint8_t byte, JsonMatcher& out) const {
  if (out.g_ != g_) out.g_ = g_;
  out.stacks_.clear();
  for (const Stack& s : stacks_) feed(s, byte, out.stacks_);
  // Alternatives that reached the same state are one.
  auto& v = out.stacks_;
  size_t n = 0;
  for (size_t i = 0; i < v.size() && n < kMaxStacks; ++i) {
    bool dup = false;
    for (size_t j = 0; j < n && !dup; ++j) dup = v[j] == v[i];
    if (!dup) {
      if (n != i) v[n] = v[i];
      ++n;
    }
  }
  v.resize(n);
  return n > 0;
}

uint32_t JsonMatcher::plain_string_room() const {
  if (stacks_.size() != 1 || stacks_[0].depth == 0) return 0;
  const Frame& f = stacks_[0].f[stacks_[0].depth - 1];
  const JsonNode& n = g_->node(f.node);
  if (n.kind != Kind::String || string_phase(f) != StringPhase::Body) return 0;
  return n.max_len - code_points(f);
}

bool JsonMatcher::accepts_end() const {
  for (const Stack& s : stacks_) {
    if (s.depth == 0 && s.started) return true;
    if (s.depth == 1 && g_->node(s.f[0].node).kind == Kind::Number &&
        number_can_end(s.f[0], g_->node(s.f[0].node)))
      return true;
  }
  return false;
}

void JsonMatcher::begin_value(Stack s, uint32_t node, uint8_t c, std::vector<Stack>& out,
                              int hops) const {
  const JsonNode& n = g_->node(node);
  if (n.kind == Kind::Union) {
    if (hops > 32) return;  // a cycle of references with no value in between
    for (uint32_t alt : n.alts) begin_value(s, alt, c, out, hops + 1);
    return;
  }
  if (s.depth >= kMaxDepth) return;
  s.f[s.depth] = Frame{};
  s.f[s.depth].node = node;
  s.depth += 1;
  feed(s, c, out);
}

// The top value is complete: pop it, tell its parent, then either keep the
// state or (a number ended by the byte after it) feed that byte to the parent.
void JsonMatcher::value_done(Stack& s, std::vector<Stack>& out, int refeed) const {
  s.depth -= 1;
  if (s.depth > 0) {
    Frame& p = s.f[s.depth - 1];
    const JsonNode& pn = g_->node(p.node);
    if (pn.kind == Kind::Array) {
      items(p) += 1;
    } else if (object_phase(p) == ObjectPhase::InExtraKey) {  // the key's string ended
      set_phase(p, ObjectPhase::BeforeColon);
      prop(p) = JsonNode::kNone;
    }
  }
  if (refeed >= 0)
    feed(s, uint8_t(refeed), out);
  else
    out.push_back(s);
}

bool JsonMatcher::string_step(Frame& f, const JsonNode& n, uint8_t c, bool* closed) const {
  switch (string_phase(f)) {
    case StringPhase::Start:
      set_phase(f, StringPhase::Body);
      return c == '"';
    case StringPhase::Body:
      if (c == '"') {
        *closed = true;
        return code_points(f) >= n.min_len;
      }
      if (c < 0x20 || code_points(f) >= n.max_len) return false;
      if (c == '\\') {
        set_phase(f, StringPhase::Escape);
        return true;
      }
      if (c < 0x80) {
        code_points(f) += 1;
        return true;
      }
      {  // a UTF-8 lead byte
        uint32_t left = 0, range = 0;
        if (!utf8_lead(c, &left, &range)) return false;
        code_points(f) += 1;
        set_phase(f, StringPhase::Utf8);
        utf8_left(f) = uint8_t(left);
        utf8_range(f) = range;
        return true;
      }
    case StringPhase::Escape:
      if (c == 'u') {
        set_phase(f, StringPhase::Hex);
        hex_digits(f) = 0;
        code_unit(f) = 0;
        return true;
      }
      if (!std::strchr("\"\\/bfnrt", c) || c == 0) return false;
      code_points(f) += 1;
      set_phase(f, StringPhase::Body);
      return true;
    case StringPhase::Hex:
    case StringPhase::LowHex: {
      const int h = hex_value(c);
      if (h < 0) return false;
      const bool after_high = string_phase(f) == StringPhase::LowHex;
      uint32_t& v = code_unit(f);
      v = v * 16 + uint32_t(h);
      const int digits = ++hex_digits(f);
      // Refuse prefixes that can only end as a lone (or missing) low surrogate.
      if (digits == 2 && !after_high && v >= 0xDC && v <= 0xDF) return false;
      if (after_high && ((digits == 1 && v != 0xD) || (digits == 2 && v < 0xDC))) return false;
      if (digits < 4) return true;
      const bool high = v >= 0xD800 && v <= 0xDBFF, low = v >= 0xDC00 && v <= 0xDFFF;
      if (after_high) {
        if (!low) return false;
      } else if (low) {
        return false;  // a lone low surrogate
      } else if (high) {
        set_phase(f, StringPhase::LowBackslash);
        return true;
      }
      code_points(f) += 1;  // one code point, a surrogate pair too
      set_phase(f, StringPhase::Body);
      return true;
    }
    case StringPhase::Utf8:
      if (c < (utf8_range(f) & 0xFF) || c > (utf8_range(f) >> 8)) return false;
      utf8_range(f) = 0x80 | 0xBF << 8;
      if (--utf8_left(f) == 0) set_phase(f, StringPhase::Body);
      return true;
    case StringPhase::LowBackslash:
      set_phase(f, StringPhase::LowU);
      return c == '\\';
    case StringPhase::LowU:
      set_phase(f, StringPhase::LowHex);
      hex_digits(f) = 0;
      code_unit(f) = 0;
      return c == 'u';
  }
  return false;
}

bool JsonMatcher::number_feasible(const Frame& f, const JsonNode& n) const {
  if (!n.bounded()) return true;
  const bool neg = f.negative != 0;
  const double inf = std::numeric_limits<double>::infinity();
  switch (number_phase(f)) {
    case NumberPhase::Minus:
      return magnitudes_overlap(neg, 0, inf, true, n);
    case NumberPhase::Zero:
      return n.integer ? magnitudes_overlap(neg, 0, 0, true, n)
                       : magnitudes_overlap(neg, 0, 1, false, n);
    case NumberPhase::IntDigits: {
      // More digits may follow: each count of them is a range of magnitudes.
      const double v = double(f.significand);
      for (int j = 0; j + int(int_digits(f)) <= kMaxDigits; ++j) {
        const double x1 = v * kPow10[j];
        const bool hit = n.integer ? magnitudes_overlap(neg, x1, x1 + kPow10[j] - 1, true, n)
                                   : magnitudes_overlap(neg, x1, (v + 1) * kPow10[j], false, n);
        if (hit) return true;
      }
      return false;
    }
    case NumberPhase::Dot:
      return magnitudes_overlap(neg, double(f.significand), double(f.significand) + 1, false, n);
    case NumberPhase::FracDigits: {
      const double x = double(f.significand) / kPow10[frac_digits(f)];
      return magnitudes_overlap(neg, x, x + 1 / kPow10[frac_digits(f)], false, n);
    }
    case NumberPhase::Start:  // number_step has always left it
    case NumberPhase::Exp:    // exponents come only without bounds
    case NumberPhase::ExpSign:
    case NumberPhase::ExpDigits:
      break;
  }
  return true;
}

bool JsonMatcher::number_can_end(const Frame& f, const JsonNode& n) const {
  // A whole number so far ("0", "12", "1.5", "1e5"): not right after '-', '.',
  // 'e' or the exponent's sign.
  const NumberPhase p = number_phase(f);
  if (p != NumberPhase::Zero && p != NumberPhase::IntDigits && p != NumberPhase::FracDigits &&
      p != NumberPhase::ExpDigits)
    return false;
  if (!n.bounded()) return true;
  const double mag = double(f.significand) / kPow10[frac_digits(f)];
  const double v = f.negative ? -mag : mag;
  return overlaps(v, true, v, true, n);
}

bool JsonMatcher::number_step(Frame& f, const JsonNode& n, uint8_t c) const {
  Frame t = f;
  const bool digit = c >= '0' && c <= '9';
  const uint64_t d = digit ? c - '0' : 0;
  const bool exp_ok = !n.integer && !n.bounded();
  const bool dot = c == '.' && !n.integer, e = (c == 'e' || c == 'E') && exp_ok;
  switch (number_phase(t)) {
    case NumberPhase::Start:
      if (c == '-') {
        t.negative = 1;
        set_phase(t, NumberPhase::Minus);
        break;
      }
      [[fallthrough]];
    case NumberPhase::Minus:
      if (!digit) return false;
      set_phase(t, d == 0 ? NumberPhase::Zero : NumberPhase::IntDigits);
      t.significand = d;
      int_digits(t) = 1;
      break;
    case NumberPhase::Zero:
    case NumberPhase::IntDigits:
      if (digit && number_phase(t) == NumberPhase::IntDigits && int_digits(t) < kMaxDigits) {
        t.significand = t.significand * 10 + d;
        int_digits(t) += 1;
      } else if (dot) {
        set_phase(t, NumberPhase::Dot);
      } else if (e) {
        set_phase(t, NumberPhase::Exp);
      } else {
        return false;
      }
      break;
    case NumberPhase::Dot:
    case NumberPhase::FracDigits:
      if (digit && int_digits(t) + frac_digits(t) < kMaxDigits) {
        t.significand = t.significand * 10 + d;
        frac_digits(t) += 1;
        set_phase(t, NumberPhase::FracDigits);
      } else if (e && number_phase(t) == NumberPhase::FracDigits) {
        set_phase(t, NumberPhase::Exp);
      } else {
        return false;
      }
      break;
    case NumberPhase::Exp:
      if (c == '+' || c == '-') {
        set_phase(t, NumberPhase::ExpSign);
        break;
      }
      [[fallthrough]];
    case NumberPhase::ExpSign:
      if (!digit) return false;
      set_phase(t, NumberPhase::ExpDigits);
      exp_digits(t) = 1;  // the integer digits are no longer needed
      break;
    case NumberPhase::ExpDigits:
      if (!digit || exp_digits(t) >= 2) return false;  // |exponent| < 100: no overflow
      exp_digits(t) += 1;
      break;
  }
  if (!number_feasible(t, n)) return false;
  f = t;
  return true;
}

// Does the key-trie node lead to a declared property that may come next: one
// at or after next_prop(f) with no required property skipped on the way?
bool JsonMatcher::key_candidate(const JsonNode& n, const Frame& f, uint32_t trie_node) const {
  uint32_t last = next_prop(f);
  while (last < n.props.size() && !n.props[last].required) ++last;
  const auto& sub = n.keys[trie_node].subtree_props;
  auto it = std::lower_bound(sub.begin(), sub.end(), next_prop(f));
  return it != sub.end() && *it <= last;
}

bool JsonMatcher::extra_allowed(const JsonNode& n, const Frame& f) const {
  if (n.additional == JsonNode::kNone) return false;
  for (size_t i = next_prop(f); i < n.props.size(); ++i)
    if (n.props[i].required) return false;
  return true;
}

void JsonMatcher::object_key_byte(Stack& s, const JsonNode& n, uint8_t c,
                                  std::vector<Stack>& out) const {
  Frame& f = s.f[s.depth - 1];
  const auto& k = n.keys[key_node(f)];
  const bool extra = extra_allowed(n, f);
  for (const auto& [byte, child] : k.children) {
    if (byte == c && (extra || key_candidate(n, f, child))) {
      key_node(f) = child;
      out.push_back(s);
      return;
    }
  }
  if (c == '"' && k.boundary) {
    const int32_t p = k.prop;
    if (p >= 0 && uint32_t(p) >= next_prop(f)) {
      uint32_t skipped = next_prop(f);
      while (skipped < uint32_t(p) && !n.props[skipped].required) ++skipped;
      if (skipped == uint32_t(p)) {
        next_prop(f) = uint32_t(p) + 1;
        prop(f) = uint32_t(p);
        set_phase(f, ObjectPhase::BeforeColon);
        out.push_back(s);
      }
      return;
    }
    if (p < 0 && extra) {
      next_prop(f) = uint32_t(n.props.size());
      prop(f) = JsonNode::kNone;
      set_phase(f, ObjectPhase::BeforeColon);
      out.push_back(s);
    }
    return;
  }
  if (!extra || s.depth >= kMaxDepth) return;
  // The key left every declared one: it is an extra key, a plain string from
  // here on. Replay what was typed into a string frame, then this byte.
  std::string typed;
  for (uint32_t t = key_node(f); t != 0; t = n.keys[t].parent)
    typed.insert(typed.begin(), char(n.keys[t].byte));
  next_prop(f) = uint32_t(n.props.size());
  set_phase(f, ObjectPhase::InExtraKey);
  Frame kf{};
  kf.node = g_->key_string();
  bool closed = false;
  string_step(kf, g_->node(kf.node), '"', &closed);
  for (char b : typed) string_step(kf, g_->node(kf.node), uint8_t(b), &closed);
  s.f[s.depth++] = kf;
  feed(s, c, out);
}

void JsonMatcher::array_byte(Stack& s, const JsonNode& n, uint8_t c,
                             std::vector<Stack>& out) const {
  Frame& f = s.f[s.depth - 1];
  const auto item = [&](uint32_t i) {
    if (i >= n.max_items) return JsonNode::kNone;
    return i < n.prefix.size() ? n.prefix[i] : n.items;
  };
  const ArrayPhase phase = array_phase(f);
  if (phase == ArrayPhase::Start) {
    if (c != '[') return;
    set_phase(f, ArrayPhase::Opened);
    out.push_back(s);
  } else if (phase == ArrayPhase::AfterItem || (phase == ArrayPhase::Opened && c == ']')) {
    if (c == ']' && items(f) >= n.min_items) return value_done(s, out, -1);
    if (c == ',' && phase == ArrayPhase::AfterItem && item(items(f)) != JsonNode::kNone) {
      set_phase(f, ArrayPhase::AfterComma);
      out.push_back(s);
    }
  } else {  // an item starts
    const uint32_t node = item(items(f));
    if (node == JsonNode::kNone) return;
    set_phase(f, ArrayPhase::AfterItem);
    begin_value(s, node, c, out, 0);
  }
}

void JsonMatcher::object_byte(Stack& s, const JsonNode& n, uint8_t c,
                              std::vector<Stack>& out) const {
  Frame& f = s.f[s.depth - 1];
  const ObjectPhase phase = object_phase(f);
  switch (phase) {
    case ObjectPhase::Start:
      if (c != '{') return;
      set_phase(f, ObjectPhase::Opened);
      out.push_back(s);
      return;
    case ObjectPhase::Opened:
    case ObjectPhase::AfterValue:
    case ObjectPhase::AfterComma:
      if (c == '}' && phase != ObjectPhase::AfterComma) {
        for (size_t i = next_prop(f); i < n.props.size(); ++i)
          if (n.props[i].required) return;
        return value_done(s, out, -1);
      }
      if ((c == '"' && phase != ObjectPhase::AfterValue) ||
          (c == ',' && phase == ObjectPhase::AfterValue)) {
        if (!extra_allowed(n, f) && !key_candidate(n, f, 0)) return;
        set_phase(f, c == ',' ? ObjectPhase::AfterComma : ObjectPhase::InKey);
        key_node(f) = 0;  // the trie's root
        out.push_back(s);
      }
      return;
    case ObjectPhase::InKey:
      return object_key_byte(s, n, c, out);
    case ObjectPhase::BeforeColon:
      if (c != ':') return;
      set_phase(f, ObjectPhase::BeforeValue);
      out.push_back(s);
      return;
    case ObjectPhase::InExtraKey:
      return;  // the key's String frame above takes the bytes
    case ObjectPhase::BeforeValue: {
      const uint32_t node = prop(f) == JsonNode::kNone ? n.additional : n.props[prop(f)].node;
      set_phase(f, ObjectPhase::AfterValue);
      begin_value(s, node, c, out, 0);
      return;
    }
  }
}

void JsonMatcher::feed(Stack s, uint8_t c, std::vector<Stack>& out) const {
  if (s.depth == 0) {
    if (!s.started) {
      s.started = true;
      begin_value(s, g_->root(), c, out, 0);
    }
    return;  // a complete value takes no more bytes
  }
  Frame& f = s.f[s.depth - 1];
  const JsonNode& n = g_->node(f.node);
  switch (n.kind) {
    case Kind::Union:
      return;  // never on a stack
    case Kind::Literal:
      if (c != uint8_t(n.literal[matched(f)])) return;
      if (++matched(f) == n.literal.size()) return value_done(s, out, -1);
      out.push_back(s);
      return;
    case Kind::String: {
      bool closed = false;
      if (!string_step(f, n, c, &closed)) return;
      if (closed) return value_done(s, out, -1);
      out.push_back(s);
      return;
    }
    case Kind::Number:
      if (number_step(f, n, c)) {
        out.push_back(s);
      } else if (number_can_end(f, n)) {
        value_done(s, out, c);
      }
      return;
    case Kind::Array:
      return array_byte(s, n, c, out);
    case Kind::Object:
      return object_byte(s, n, c, out);
  }
}

}  // namespace tern
