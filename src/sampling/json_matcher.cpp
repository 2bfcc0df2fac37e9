// The byte-level pushdown automaton behind JsonMatcher. Phases per frame kind:
//   Literal  a = bytes matched.
//   String   0 before '"', 1 body, 2 after '\', 3 \u hex (aux digits, b value),
//            4 inside a UTF-8 sequence (aux bytes left, b = lo | hi << 8),
//            5/6/7 expecting the low surrogate's '\', 'u', hex; a = code points.
//   Number   0 start, 1 after '-', 2 "0", 3 integer digits, 4 after '.',
//            5 fraction digits, 6 after 'e', 7 exponent sign, 8 exponent digits;
//            a = integer (or exponent) digits, aux = fraction digits, m = digits.
//   Array    0 before '[', 1 after '[', 2 after an item, 3 after ','; a = items.
//   Object   0 before '{', 1 after '{', 2 after a value, 3 after ',', 4 in a
//            declared key (b = key-trie node), 5 before ':', 6 in an extra key
//            (a String frame above), 7 before the value (b = property or
//            kNone for an extra one); a = next property that may come.
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
  if (n.kind != Kind::String || f.phase != 1) return 0;
  return n.max_len - f.a;
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
      p.a += 1;
    } else if (p.phase == 6) {  // an extra key's string ended
      p.phase = 5;
      p.b = JsonNode::kNone;
    }
  }
  if (refeed >= 0)
    feed(s, uint8_t(refeed), out);
  else
    out.push_back(s);
}

bool JsonMatcher::string_step(Frame& f, const JsonNode& n, uint8_t c, bool* closed) const {
  switch (f.phase) {
    case 0:
      f.phase = 1;
      return c == '"';
    case 1:
      if (c == '"') {
        *closed = true;
        return f.a >= n.min_len;
      }
      if (c < 0x20 || f.a >= n.max_len) return false;
      if (c == '\\') {
        f.phase = 2;
        return true;
      }
      if (c < 0x80) {
        f.a += 1;
        return true;
      }
      {  // a UTF-8 lead byte
        uint32_t left = 0, range = 0;
        if (!utf8_lead(c, &left, &range)) return false;
        f.a += 1;
        f.phase = 4;
        f.aux = uint8_t(left);
        f.b = range;
        return true;
      }
    case 2:
      if (c == 'u') {
        f.phase = 3;
        f.aux = 0;
        f.b = 0;
        return true;
      }
      if (!std::strchr("\"\\/bfnrt", c) || c == 0) return false;
      f.a += 1;
      f.phase = 1;
      return true;
    case 3:
    case 7: {
      const int h = hex_value(c);
      if (h < 0) return false;
      f.b = f.b * 16 + uint32_t(h);
      ++f.aux;
      // Refuse prefixes that can only end as a lone (or missing) low surrogate.
      if (f.aux == 2 && f.phase == 3 && f.b >= 0xDC && f.b <= 0xDF) return false;
      if (f.phase == 7 && ((f.aux == 1 && f.b != 0xD) || (f.aux == 2 && f.b < 0xDC))) return false;
      if (f.aux < 4) return true;
      const bool high = f.b >= 0xD800 && f.b <= 0xDBFF, low = f.b >= 0xDC00 && f.b <= 0xDFFF;
      if (f.phase == 7) {
        if (!low) return false;
      } else if (low) {
        return false;  // a lone low surrogate
      } else if (high) {
        f.phase = 5;
        return true;
      }
      f.a += 1;
      f.phase = 1;
      return true;
    }
    case 4:
      if (c < (f.b & 0xFF) || c > (f.b >> 8)) return false;
      f.b = 0x80 | 0xBF << 8;
      if (--f.aux == 0) f.phase = 1;
      return true;
    case 5:
      f.phase = 6;
      return c == '\\';
    case 6:
      f.phase = 7;
      f.aux = 0;
      f.b = 0;
      return c == 'u';
  }
  return false;
}

bool JsonMatcher::number_feasible(const Frame& f, const JsonNode& n) const {
  if (!n.bounded()) return true;
  const bool neg = f.neg != 0;
  const double inf = std::numeric_limits<double>::infinity();
  switch (f.phase) {
    case 1:
      return magnitudes_overlap(neg, 0, inf, true, n);
    case 2:
      return n.integer ? magnitudes_overlap(neg, 0, 0, true, n)
                       : magnitudes_overlap(neg, 0, 1, false, n);
    case 3: {
      const double v = double(f.m);
      for (int j = 0; j + int(f.a) <= kMaxDigits; ++j) {
        const double x1 = v * kPow10[j];
        const bool hit = n.integer ? magnitudes_overlap(neg, x1, x1 + kPow10[j] - 1, true, n)
                                   : magnitudes_overlap(neg, x1, (v + 1) * kPow10[j], false, n);
        if (hit) return true;
      }
      return false;
    }
    case 4:
      return magnitudes_overlap(neg, double(f.m), double(f.m) + 1, false, n);
    case 5: {
      const double x = double(f.m) / kPow10[f.aux];
      return magnitudes_overlap(neg, x, x + 1 / kPow10[f.aux], false, n);
    }
  }
  return true;
}

bool JsonMatcher::number_can_end(const Frame& f, const JsonNode& n) const {
  if (f.phase != 2 && f.phase != 3 && f.phase != 5 && f.phase != 8) return false;
  if (!n.bounded()) return true;
  const double mag = double(f.m) / kPow10[f.aux];
  const double v = f.neg ? -mag : mag;
  return overlaps(v, true, v, true, n);
}

bool JsonMatcher::number_step(Frame& f, const JsonNode& n, uint8_t c) const {
  Frame t = f;
  const bool digit = c >= '0' && c <= '9';
  const uint64_t d = digit ? c - '0' : 0;
  const bool exp_ok = !n.integer && !n.bounded();
  const bool dot = c == '.' && !n.integer, e = (c == 'e' || c == 'E') && exp_ok;
  switch (t.phase) {
    case 0:
      if (c == '-') {
        t.neg = 1;
        t.phase = 1;
        break;
      }
      [[fallthrough]];
    case 1:
      if (!digit) return false;
      t.phase = d == 0 ? 2 : 3;
      t.m = d;
      t.a = 1;
      break;
    case 2:
    case 3:
      if (digit && t.phase == 3 && t.a < kMaxDigits) {
        t.m = t.m * 10 + d;
        t.a += 1;
      } else if (dot) {
        t.phase = 4;
      } else if (e) {
        t.phase = 6;
      } else {
        return false;
      }
      break;
    case 4:
    case 5:
      if (digit && t.a + t.aux < kMaxDigits) {
        t.m = t.m * 10 + d;
        t.aux += 1;
        t.phase = 5;
      } else if (e && t.phase == 5) {
        t.phase = 6;
      } else {
        return false;
      }
      break;
    case 6:
      if (c == '+' || c == '-') {
        t.phase = 7;
        break;
      }
      [[fallthrough]];
    case 7:
      if (!digit) return false;
      t.phase = 8;
      t.a = 1;
      break;
    case 8:
      if (!digit || t.a >= 2) return false;  // |exponent| < 100: no overflow
      t.a += 1;
      break;
  }
  if (!number_feasible(t, n)) return false;
  f = t;
  return true;
}

// Does the key-trie node lead to a declared property that may come next: one
// at or after f.a with no required property skipped on the way?
bool JsonMatcher::key_candidate(const JsonNode& n, const Frame& f, uint32_t trie_node) const {
  uint32_t last = f.a;
  while (last < n.props.size() && !n.props[last].required) ++last;
  const auto& sub = n.keys[trie_node].subtree_props;
  auto it = std::lower_bound(sub.begin(), sub.end(), f.a);
  return it != sub.end() && *it <= last;
}

bool JsonMatcher::extra_allowed(const JsonNode& n, const Frame& f) const {
  if (n.additional == JsonNode::kNone) return false;
  for (size_t i = f.a; i < n.props.size(); ++i)
    if (n.props[i].required) return false;
  return true;
}

void JsonMatcher::object_key_byte(Stack& s, const JsonNode& n, uint8_t c,
                                  std::vector<Stack>& out) const {
  Frame& f = s.f[s.depth - 1];
  const auto& k = n.keys[f.b];
  const bool extra = extra_allowed(n, f);
  for (const auto& [byte, child] : k.children) {
    if (byte == c && (extra || key_candidate(n, f, child))) {
      f.b = child;
      out.push_back(s);
      return;
    }
  }
  if (c == '"' && k.boundary) {
    const int32_t p = k.prop;
    if (p >= 0 && uint32_t(p) >= f.a) {
      uint32_t skipped = f.a;
      while (skipped < uint32_t(p) && !n.props[skipped].required) ++skipped;
      if (skipped == uint32_t(p)) {
        f.a = uint32_t(p) + 1;
        f.b = uint32_t(p);
        f.phase = 5;
        out.push_back(s);
      }
      return;
    }
    if (p < 0 && extra) {
      f.a = uint32_t(n.props.size());
      f.b = JsonNode::kNone;
      f.phase = 5;
      out.push_back(s);
    }
    return;
  }
  if (!extra || s.depth >= kMaxDepth) return;
  // The key left every declared one: it is an extra key, a plain string from
  // here on. Replay what was typed into a string frame, then this byte.
  std::string typed;
  for (uint32_t t = f.b; t != 0; t = n.keys[t].parent)
    typed.insert(typed.begin(), char(n.keys[t].byte));
  f.a = uint32_t(n.props.size());
  f.phase = 6;
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
  if (f.phase == 0) {
    if (c != '[') return;
    f.phase = 1;
    out.push_back(s);
  } else if (f.phase == 2 || (f.phase == 1 && c == ']')) {
    if (c == ']' && f.a >= n.min_items) return value_done(s, out, -1);
    if (c == ',' && f.phase == 2 && item(f.a) != JsonNode::kNone) {
      f.phase = 3;
      out.push_back(s);
    }
  } else {  // an item starts
    const uint32_t node = item(f.a);
    if (node == JsonNode::kNone) return;
    f.phase = 2;
    begin_value(s, node, c, out, 0);
  }
}

void JsonMatcher::object_byte(Stack& s, const JsonNode& n, uint8_t c,
                              std::vector<Stack>& out) const {
  Frame& f = s.f[s.depth - 1];
  switch (f.phase) {
    case 0:
      if (c != '{') return;
      f.phase = 1;
      out.push_back(s);
      return;
    case 1:
    case 2:
    case 3:
      if (c == '}' && f.phase != 3) {
        for (size_t i = f.a; i < n.props.size(); ++i)
          if (n.props[i].required) return;
        return value_done(s, out, -1);
      }
      if ((c == '"' && f.phase != 2) || (c == ',' && f.phase == 2)) {
        if (!extra_allowed(n, f) && !key_candidate(n, f, 0)) return;
        f.phase = c == ',' ? 3 : 4;
        f.b = 0;
        out.push_back(s);
      }
      return;
    case 4:
      return object_key_byte(s, n, c, out);
    case 5:
      if (c != ':') return;
      f.phase = 7;
      out.push_back(s);
      return;
    case 7: {
      const uint32_t node = f.b == JsonNode::kNone ? n.additional : n.props[f.b].node;
      f.phase = 2;
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
      if (c != uint8_t(n.literal[f.a])) return;
      if (++f.a == n.literal.size()) return value_done(s, out, -1);
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
