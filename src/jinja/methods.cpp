// Methods of str, list and dict that chat templates call (Python's
// semantics), code-point string helpers, and the global functions.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "interpreter.h"

namespace tern::jinja {

std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> off;
  for (size_t i = 0; i < s.size(); ++i)
    if ((uint8_t(s[i]) & 0xC0) != 0x80 || off.empty()) off.push_back(i);
  off.push_back(s.size());
  return off;
}

Str str_slice(const Str& s, int64_t start, int64_t stop, int64_t step, bool has_start,
              bool has_stop) {
  const std::vector<size_t> off = char_offsets(s.view());
  const int64_t n = int64_t(off.size()) - 1;
  auto clamp = [&](int64_t i, bool given, int64_t dflt) {
    if (!given) return dflt;
    if (i < 0) i += n;
    return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(start, has_start, step > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, has_stop, step > 0 ? n : -1);
  if (step == 1) return b < e ? s.substr(off[size_t(b)], off[size_t(e)] - off[size_t(b)]) : Str();
  Str out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step)
    out.append(s.substr(off[size_t(i)], off[size_t(i) + 1] - off[size_t(i)]));
  return out;
}

namespace {

bool is_py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

const Value& arg(Interpreter& in, CallArgs& a, size_t i, std::string_view name) {
  const Value* v = a.get(i, name);
  if (!v) in.fail("missing argument '" + std::string(name) + "'");
  return *v;
}

const std::string& str_arg(Interpreter& in, CallArgs& a, size_t i, std::string_view name) {
  const Value& v = arg(in, a, i, name);
  if (!v.is_string()) in.fail("argument '" + std::string(name) + "' must be a string");
  return v.text();
}

// strip/lstrip/rstrip: whitespace, or the code points of `chars`.
Value strip(Interpreter& in, const Str& s, CallArgs& a, bool left, bool right) {
  const Value* chars = a.get(0, "chars");
  const std::vector<size_t> off = char_offsets(s.view());
  auto strippable = [&](size_t i) {
    const std::string_view c = s.view().substr(off[i], off[i + 1] - off[i]);
    if (!chars || chars->is_none()) return c.size() == 1 && is_py_space(c[0]);
    if (!chars->is_string()) in.fail("strip arg must be None or str");
    return chars->text().find(c) != std::string::npos;
  };
  size_t b = 0, e = off.size() - 1;
  while (left && b < e && strippable(b)) ++b;
  while (right && e > b && strippable(e - 1)) --e;
  return Value(s.substr(off[b], off[e] - off[b]));
}

Value split(Interpreter& in, const Str& s, CallArgs& a, bool from_right) {
  const Value* sep = a.get(0, "sep");
  const Value* maxv = a.get(1, "maxsplit");
  int64_t max = maxv && maxv->is_int() ? maxv->as_int() : -1;
  Array parts;
  const std::string& t = s.text();
  if (!sep || sep->is_none()) {  // runs of whitespace; no empty parts
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t i = 0; i < t.size();) {
      while (i < t.size() && is_py_space(t[i])) ++i;
      if (i == t.size()) break;
      size_t j = i;
      while (j < t.size() && !is_py_space(t[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (max >= 0 && int64_t(words.size()) > max + 1) {
      if (from_right) {
        const size_t first = words.size() - size_t(max) - 1;
        words[first].first = words[0].first;
        words.erase(words.begin(), words.begin() + long(first));
      } else {
        words[size_t(max)].second = words.back().second;
        words.resize(size_t(max) + 1);
      }
    }
    for (auto [b, e] : words) parts.push_back(Value(s.substr(b, e - b)));
    return Value(std::move(parts));
  }
  if (!sep->is_string()) in.fail("split separator must be a string");
  const std::string& d = sep->text();
  if (d.empty()) in.fail("empty separator");
  std::vector<size_t> cuts;  // positions of the separators used
  if (!from_right) {
    for (size_t p = t.find(d); p != std::string::npos && (max < 0 || int64_t(cuts.size()) < max);
         p = t.find(d, p + d.size()))
      cuts.push_back(p);
  } else {
    for (size_t p = t.rfind(d); p != std::string::npos && (max < 0 || int64_t(cuts.size()) < max);
         p = p == 0 ? std::string::npos : t.rfind(d, p - 1)) {
      cuts.push_back(p);
      if (p < d.size()) break;
    }
    std::reverse(cuts.begin(), cuts.end());
  }
  size_t at = 0;
  for (size_t c : cuts) {
    parts.push_back(Value(s.substr(at, c - at)));
    at = c + d.size();
  }
  parts.push_back(Value(s.substr(at)));
  in.step();
  return Value(std::move(parts));
}

bool affix(Interpreter& in, const std::string& t, const Value& what, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) in.fail("startswith/endswith take a string or a tuple of strings");
    return prefix ? t.starts_with(v.text()) : t.ends_with(v.text());
  };
  if (what.is_array()) return std::any_of(what.as_array().begin(), what.as_array().end(), one);
  return one(what);
}

}  // namespace

Value replace_str(Interpreter& in, const Str& s, const Str& from, const Str& to, int64_t count) {
  Str out;
  const std::string& t = s.text();
  size_t at = 0;
  if (from.empty()) {  // Python inserts `to` between every character
    const std::vector<size_t> off = char_offsets(t);
    for (size_t i = 0; i + 1 < off.size() && (count < 0 || int64_t(i) < count); ++i) {
      in.check_size(out.size() + to.size() + t.size());
      out.append(to).append(s.substr(off[i], off[i + 1] - off[i]));
      at = off[i + 1];
    }
    if (count < 0 || int64_t(off.size() - 1) < count) out.append(to);
    return Value(out.append(s.substr(at)));
  }
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t p = t.find(from.text(), at);
    if (p == std::string::npos) break;
    in.check_size(out.size() + to.size() + (p - at));
    out.append(s.substr(at, p - at)).append(to);
    at = p + from.size();
  }
  return Value(out.append(s.substr(at)));
}

Str change_case(const Str& s, int mode);  // filters.cpp: 0 lower, 1 upper, 2 capitalize, 3 title
Value format_str(Interpreter& in, const Str& fmt, CallArgs& a);  // filters.cpp

namespace {

Value str_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& a) {
  const Str& s = self.as_str();
  const std::string& t = s.text();
  if (name == "strip") return strip(in, s, a, true, true);
  if (name == "lstrip") return strip(in, s, a, true, false);
  if (name == "rstrip") return strip(in, s, a, false, true);
  if (name == "split") return split(in, s, a, false);
  if (name == "rsplit") return split(in, s, a, true);
  if (name == "startswith") return affix(in, t, arg(in, a, 0, "prefix"), true);
  if (name == "endswith") return affix(in, t, arg(in, a, 0, "suffix"), false);
  if (name == "lower") return Value(change_case(s, 0));
  if (name == "upper") return Value(change_case(s, 1));
  if (name == "capitalize") return Value(change_case(s, 2));
  if (name == "title") return Value(change_case(s, 3));
  if (name == "format") return format_str(in, s, a);
  if (name == "replace") {
    const Value& from = arg(in, a, 0, "old");
    const Value& to = arg(in, a, 1, "new");
    if (!from.is_string() || !to.is_string()) in.fail("replace() takes strings");
    const Value* c = a.get(2, "count");
    return replace_str(in, s, from.as_str(), to.as_str(), c && c->is_int() ? c->as_int() : -1);
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    const std::string& sub = str_arg(in, a, 0, "sub");
    if (name == "count") {
      if (sub.empty()) return self.length() + 1;
      int64_t n = 0;
      for (size_t p = t.find(sub); p != std::string::npos; p = t.find(sub, p + sub.size())) ++n;
      return n;
    }
    const size_t p = name == "rfind" ? t.rfind(sub) : t.find(sub);
    if (p == std::string::npos) {
      if (name == "index") in.fail("substring not found");
      return int64_t(-1);
    }
    return int64_t(char_offsets(t.substr(0, p)).size() - 1);
  }
  auto all_of = [&](auto pred) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [&](char c) { return pred(uint8_t(c)); });
  };
  if (name == "isdigit") return all_of([](int c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all_of([](int c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all_of([](int c) { return std::isalnum(c) != 0; });
  if (name == "isspace") return all_of([](int c) { return is_py_space(char(c)); });
  if (name == "islower") return t != change_case(s, 1).text() && t == change_case(s, 0).text();
  if (name == "isupper") return t != change_case(s, 0).text() && t == change_case(s, 1).text();
  if (name == "join") {
    Str out;
    bool first = true;
    for (const Value& v : iterate(in, arg(in, a, 0, "iterable"))) {
      if (!v.is_string()) in.fail("join() expects strings");
      if (!first) out.append(s);
      first = false;
      in.check_size(out.size() + v.as_str().size());
      out.append(v.as_str());
    }
    return Value(std::move(out));
  }
  in.fail("unsupported str method '" + name + "'");
}

Value list_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& a) {
  Array& l = self.as_array();
  if (name == "append") {
    in.check_size(l.size() + 1);
    l.push_back(arg(in, a, 0, "object"));
    return Value::none();
  }
  if (name == "extend") {
    for (const Value& v : iterate(in, arg(in, a, 0, "iterable"))) l.push_back(v);
    in.check_size(l.size());
    return Value::none();
  }
  if (name == "pop" || name == "insert") {
    const Value* iv = a.get(0, "index");
    int64_t i = iv && iv->is_int() ? iv->as_int() : (name == "pop" ? -1 : 0);
    const int64_t n = int64_t(l.size());
    if (i < 0) i += n;
    if (name == "insert") {
      l.insert(l.begin() + std::clamp<int64_t>(i, 0, n), arg(in, a, 1, "object"));
      return Value::none();
    }
    if (i < 0 || i >= n) in.fail("pop index out of range");
    Value v = l[size_t(i)];
    l.erase(l.begin() + i);
    return v;
  }
  if (name == "index" || name == "count") {
    const Value& x = arg(in, a, 0, "value");
    int64_t n = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!equals(l[i], x)) continue;
      if (name == "index") return int64_t(i);
      ++n;
    }
    if (name == "index") in.fail("value is not in list");
    return n;
  }
  if (name == "reverse") {
    std::reverse(l.begin(), l.end());
    return Value::none();
  }
  if (name == "copy") return Value(Array(l));
  in.fail("unsupported list method '" + name + "'");
}

Value dict_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& a) {
  Object& o = self.as_object();
  if (name == "items" || name == "keys" || name == "values") {
    Array out;
    for (size_t i = 0; i < o.items.size(); ++i) {
      if (name == "items") out.push_back(Value(Array{o.key(i), o.items[i].second}));
      if (name == "keys") out.push_back(o.key(i));
      if (name == "values") out.push_back(o.items[i].second);
    }
    return Value(std::move(out));
  }
  if (name == "get" || name == "pop" || name == "setdefault") {
    const Value& k = arg(in, a, 0, "key");
    const Value* d = a.get(1, "default");
    const Value* v = o.find(k.is_string() ? k.text() : to_str(k).text());
    if (!v) {
      if (name == "pop" && !d) in.fail("pop(): key not found");
      if (name == "pop" || name == "setdefault") (void)0;
      if (name == "setdefault") o.set_key(k, d ? *d : Value::none());
      return d ? *d : Value::none();
    }
    Value r = *v;
    if (name == "pop") o.erase(k.text());
    return r;
  }
  if (name == "update") {
    if (const Value* other = a.get(0, "other"); other && other->is_object())
      for (const auto& [k, v] : other->as_object().items) o.set(k, v);
    for (const auto& [k, v] : a.keyword) o.set(k, v);
    return Value::none();
  }
  if (name == "copy") return Value(Object(o));
  in.fail("unsupported dict method '" + name + "'");
}

bool is_method(const Value& self, const std::string& n) {
  static const char* kStr[] = {
      "strip", "lstrip",     "rstrip",  "split",   "rsplit",  "startswith", "endswith", "lower",
      "upper", "capitalize", "title",   "format",  "replace", "find",       "rfind",    "count",
      "index", "isdigit",    "isalpha", "isalnum", "isspace", "islower",    "isupper",  "join"};
  static const char* kList[] = {"append", "extend", "pop",     "insert",
                                "index",  "count",  "reverse", "copy"};
  static const char* kDict[] = {"items", "keys",       "values", "get",
                                "pop",   "setdefault", "update", "copy"};
  auto in = [&](const auto& names) {
    return std::any_of(std::begin(names), std::end(names), [&](const char* m) { return n == m; });
  };
  if (self.is_string()) return in(kStr);
  if (self.is_array()) return in(kList);
  if (self.is_object()) return !self.as_object().is_namespace && in(kDict);
  return false;
}

}  // namespace

Value method(const Value& self, const std::string& name) {
  if (!is_method(self, name)) return Value::undefined();
  return Value(Function{name, [self, name](Interpreter& in, CallArgs& a) -> Value {
                          if (self.is_string()) return str_method(in, self, name, a);
                          if (self.is_array()) return list_method(in, self, name, a);
                          return dict_method(in, self, name, a);
                        }});
}

namespace {

Value range_fn(Interpreter& in, CallArgs& a) {
  int64_t v[3] = {0, 0, 1};
  if (a.positional.empty() || a.positional.size() > 3) in.fail("range() takes 1 to 3 integers");
  for (size_t i = 0; i < a.positional.size(); ++i) {
    if (!a.positional[i].is_int()) in.fail("range() takes integers");
    v[i + (a.positional.size() == 1 ? 1 : 0)] = a.positional[i].as_int();
  }
  if (v[2] == 0) in.fail("range() step must not be zero");
  const double n = std::max(0.0, std::ceil((double(v[1]) - double(v[0])) / double(v[2])));
  if (n > 100000) in.fail("range() too big (more than 100000 items)");
  Array out;
  for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) out.push_back(Value(i));
  return Value(std::move(out));
}

Value strftime_fn(Interpreter& in, CallArgs& a, std::time_t fixed) {
  const std::string& fmt = str_arg(in, a, 0, "format");
  if (fmt.size() > 256) in.fail("strftime_now(): format too long");
  std::tm tm{};
  if (fixed != 0) {
    gmtime_r(&fixed, &tm);
  } else {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  char buf[2048];
  const size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

void add_globals(Scope& s, const Options& o) {
  s.vars["range"] = Value(Function{"range", range_fn});
  s.vars["namespace"] = Value(Function{"namespace", [](Interpreter& in, CallArgs& a) -> Value {
                                         Object ns;
                                         ns.is_namespace = true;
                                         if (!a.positional.empty() && a.positional[0].is_object())
                                           ns.items = a.positional[0].as_object().items;
                                         for (auto& [k, v] : a.keyword) ns.set(k, v);
                                         return Value(std::move(ns));
                                       }});
  s.vars["dict"] = Value(Function{"dict", [](Interpreter&, CallArgs& a) -> Value {
                                    Object d;
                                    for (auto& [k, v] : a.keyword) d.set(k, v);
                                    return Value(std::move(d));
                                  }});
  s.vars["raise_exception"] =
      Value(Function{"raise_exception", [](Interpreter& in, CallArgs& a) -> Value {
                       const Value* m = a.get(0, "message");
                       throw Error("template raised an exception: " + (m ? to_str(*m).text() : ""));
                     }});
  const std::time_t now = o.now;
  s.vars["strftime_now"] = Value(Function{
      "strftime_now", [now](Interpreter& in, CallArgs& a) { return strftime_fn(in, a, now); }});
}

}  // namespace tern::jinja
