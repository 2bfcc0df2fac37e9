#pragma once
// Helpers for the constrained-decoding tests: a byte-level test vocabulary, a
// validator for the JSON Schema subset the grammar supports (the oracle), and
// a seeded random walk through the token mask.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tern/sampling/json_matcher.h"
#include "tern/sampling/token_trie.h"

namespace tern::test {

using json = nlohmann::json;

// Every single byte, JSON punctuation runs, keywords, digits, words, escapes,
// multi-byte UTF-8 (whole and split) and random ASCII runs: ~2,000 tokens.
inline std::vector<std::string> test_vocab(uint64_t seed = 7) {
  std::vector<std::string> v;
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* s :
       {"{\"",    "\":",      "\",\"",    "\"}",      "},",      "}]",    "[{",    "[]",
        "{}",     "\":\"",    "\":[",     "\":{",     "],",      "true",  "false", "null",
        "tru",    "nul",      "fa",       "lse",      "-1",      "10",    "00",    "0.5",
        ".25",    "1e",       "E+",       "e-",       "123",     "99",    "\\\"",  "\\\\",
        "\\n",    "\\u",      "\\u00e9",  "\\ud83d",  "\\ude00", "00e9",  "é",     "ü",
        "日本",   "😀",        "\xF0\x9F", "\x98\x80", "\xC3",    "\xA9",  " ",     "  ",
        "\n",     "name",     "age",      "id",       "type",    "value", "items", "tags",
        "\"name", "\"age\":", "child",    "children", "next",    "kind",  "a",     "b",
        "x",      "y",        "hello",    "world",    "ok",      "error"})
    v.push_back(s);
  std::mt19937_64 rng(seed);
  const std::string chars = "abcdefghijklmnopqrstuvwxyz0123456789{}[]\":,.-+eE \\";
  for (int i = 0; i < 1500; ++i) {
    std::string s;
    const int len = 2 + int(rng() % 5);
    for (int j = 0; j < len; ++j) s += chars[rng() % chars.size()];
    v.push_back(s);
  }
  v.push_back("");  // a control token: never allowed by the trie
  return v;
}

// Code points in a UTF-8 string (Python's len()).
inline size_t codepoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Does v satisfy schema s (resolving $ref against root)? oneOf counts as anyOf.
inline bool validates(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    if (r == "#") return validates(v, root, root);
    const auto slash = r.rfind('/');
    const std::string section = r.substr(2, slash - 2), name = r.substr(slash + 1);
    return validates(v, root[section][name], root);
  }
  if (s.contains("allOf")) return validates(v, s["allOf"][0], root);
  for (const char* kw : {"anyOf", "oneOf"})
    if (s.contains(kw)) {
      for (const auto& alt : s[kw])
        if (validates(v, alt, root)) return true;
      return false;
    }
  if (s.value("nullable", false) && v.is_null()) return true;
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum"))
    return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string())
      types.push_back(s["type"]);
    else
      for (const auto& t : s["type"]) types.push_back(t);
    bool ok = false;
    for (const auto& t : types)
      ok |= (t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) ||
            (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
            (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
            (t == "integer" &&
             (v.is_number_integer() ||
              (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))));
    if (!ok) return false;
  }
  if (v.is_string()) {
    const size_t n = codepoints(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    const size_t np = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < np) {
        if (!validates(v[i], s["prefixItems"][i], root)) return false;
      } else if (s.contains("items") && !validates(v[i], s["items"], root)) {
        return false;
      }
    }
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const auto& k : s["required"])
        if (!v.contains(k.get<std::string>())) return false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (s.contains("properties") && s["properties"].contains(it.key())) {
        if (!validates(it.value(), s["properties"][it.key()], root)) return false;
      } else if (s.contains("additionalProperties") &&
                 !validates(it.value(), s["additionalProperties"], root)) {
        return false;
      }
    }
  }
  return true;
}

// Walks the mask with random choices until the matcher accepts the end.
// After `budget` tokens it prefers tokens that close things, so recursive
// grammars finish. Returns the output; *ok = false if it got stuck.
inline std::string random_walk(JsonMatcher m, const TokenTrie& trie, uint64_t seed, bool* ok,
                               int budget = 60) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> allowed(size_t(trie.n_vocab()));
  TokenTrie::Scratch scratch;
  std::string out;
  const char* closers[] = {"\"", "}", "]", "0", "1", "null", "a", ",", ":", "\"a\"", "{"};
  for (int step = 0; step < 3000; ++step) {
    if (m.accepts_end() && (step > budget || rng() % 4 == 0)) {
      *ok = true;
      return out;
    }
    const size_t n = trie.allowed(m, allowed, scratch);
    if (n == 0) {
      *ok = m.accepts_end();
      return out;
    }
    int32_t pick = -1;
    if (step > budget) {
      for (const char* c : closers) {
        for (int32_t id = 0; id < trie.n_vocab() && pick < 0; ++id)
          if (allowed[size_t(id)] && trie.piece(id) == c) pick = id;
        if (pick >= 0 && (rng() % 8 != 0)) break;
        pick = -1;
      }
    }
    if (pick < 0) {
      size_t k = rng() % n;
      for (int32_t id = 0; id < trie.n_vocab(); ++id)
        if (allowed[size_t(id)] && k-- == 0) {
          pick = id;
          break;
        }
    }
    if (!m.advance(trie.piece(pick))) break;  // the mask promised it
    out += trie.piece(pick);
  }
  *ok = false;
  return out;
}

}  // namespace tern::test
