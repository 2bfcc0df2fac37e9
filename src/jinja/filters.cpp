// Filters (jinja2's builtins that chat templates use, and transformers'
// tojson), looked up by name from the evaluator; string formatting helpers.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "interpreter.h"

namespace tern::jinja {

Value replace_str(Interpreter& in, const Str& s, const Str& from, const Str& to, int64_t count);

// ASCII case changes; byte lengths stay, so do the input marks.
// mode: 0 lower, 1 upper, 2 capitalize, 3 title.
Str change_case(const Str& s, int mode) {
  std::string t = s.text();
  bool prev_alpha = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const int c = uint8_t(t[i]);
    const bool upper = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && !prev_alpha);
    if (c < 0x80) t[i] = char(upper ? std::toupper(c) : std::tolower(c));
    prev_alpha = c >= 0x80 || std::isalpha(c) != 0;
  }
  return s.with_text(std::move(t));
}

// Python's str.format: {} {0} {name} and {{ }}; no format specs.
Value format_str(Interpreter& in, const Str& fmt, CallArgs& a) {
  const std::string& f = fmt.text();
  Str out;
  size_t next_auto = 0, at = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if ((f[i] == '{' || f[i] == '}') && i + 1 < f.size() && f[i + 1] == f[i]) {
      out.append(fmt.substr(at, i - at + 1));
      at = ++i + 1;
      continue;
    }
    if (f[i] == '}') in.fail("format(): single '}' in format string");
    if (f[i] != '{') continue;
    const size_t close = f.find('}', i);
    if (close == std::string::npos) in.fail("format(): unclosed '{'");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) in.fail("format(): specs not supported");
    out.append(fmt.substr(at, i - at));
    const Value* v = nullptr;
    if (field.empty()) {
      v = next_auto < a.positional.size() ? &a.positional[next_auto++] : nullptr;
    } else if (std::isdigit(uint8_t(field[0]))) {
      const size_t k = std::strtoul(field.c_str(), nullptr, 10);
      v = k < a.positional.size() ? &a.positional[k] : nullptr;
    } else {
      v = a.get(SIZE_MAX, field);
    }
    if (!v) in.fail("format(): no argument for '{" + field + "}'");
    out.append(to_str(*v));
    in.check_size(out.size());
    at = i = close;
    ++at;
  }
  return Value(out.append(fmt.substr(at)));
}

namespace {

const Value* kwarg(CallArgs& a, size_t i, std::string_view name) {
  return a.get(i, name);
}

bool flag(CallArgs& a, size_t i, std::string_view name) {
  const Value* v = a.get(i, name);
  return v && v->truthy();
}

// Python's % formatting, for the `format` filter: %s, %d, %%.
Value printf_format(Interpreter& in, const Value& v, CallArgs& a) {
  if (!v.is_string()) in.fail("format filter expects a string");
  const std::string& f = v.text();
  Str out;
  size_t k = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.append(std::string_view(&f[i], 1));
      continue;
    }
    if (++i >= f.size()) in.fail("format: incomplete format");
    if (f[i] == '%') {
      out.append("%");
      continue;
    }
    if (f[i] != 's' && f[i] != 'd') in.fail(std::string("format: unsupported %") + f[i]);
    if (k >= a.positional.size()) in.fail("format: not enough arguments");
    const Value& x = a.positional[k++];
    if (f[i] == 'd' && !(x.is_int() || x.is_bool() || x.is_float()))
      in.fail("format: %d needs a number");
    out.append(f[i] == 'd' && x.is_float()  ? Str(std::to_string(int64_t(x.as_float())))
               : f[i] == 'd' && x.is_bool() ? Str(x.as_bool() ? "1" : "0")
                                            : to_str(x));
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value tojson(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* ind = kwarg(a, 1, "indent");
  int indent = -1;
  if (ind && ind->is_int()) indent = int(std::clamp<int64_t>(ind->as_int(), 0, 64));
  if (ind && ind->is_string()) in.fail("tojson: a string indent is not supported");
  std::string item_sep, key_sep;
  if (const Value* sep = kwarg(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_array() || sep->as_array().size() != 2 || !sep->as_array()[0].is_string() ||
        !sep->as_array()[1].is_string())
      in.fail("tojson: separators must be two strings");
    item_sep = sep->as_array()[0].text();
    key_sep = sep->as_array()[1].text();
    if (item_sep.empty() || key_sep.empty()) in.fail("tojson: empty separators are not supported");
  }
  if (v.is_undefined()) in.fail("tojson: Object of type Undefined is not JSON serializable");
  Str s =
      to_json(v, indent, flag(a, 3, "sort_keys"), item_sep, key_sep, flag(a, 0, "ensure_ascii"));
  in.check_size(s.size());
  return Value(std::move(s));
}

// jinja2's indent(width=4, first=False, blank=False).
Value indent(Interpreter& in, const Value& v, CallArgs& a) {
  const Str s = to_str(v);
  std::string pad = "    ";
  if (const Value* w = kwarg(a, 0, "width")) {
    if (w->is_string()) {
      pad = w->text();
    } else if (w->is_int()) {
      pad = std::string(size_t(std::clamp<int64_t>(w->as_int(), 0, 1024)), ' ');
    }
  }
  const bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  std::vector<Str> lines;  // splitlines() of s + "\n"
  size_t at = 0;
  for (size_t p = s.text().find('\n'); p != std::string::npos; p = s.text().find('\n', at)) {
    lines.push_back(s.substr(at, p - at));
    at = p + 1;
  }
  lines.push_back(s.substr(at));  // s + "\n" ends with a newline: this is the last line
  Str out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out.append("\n");
    if ((i > 0 || first) && (blank || !lines[i].empty())) out.append(pad);
    out.append(lines[i]);
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value attr_of(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  size_t at = 0;
  for (;;) {
    const size_t dot = path.find('.', at);
    const std::string part =
        path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    int64_t index = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    if (!part.empty() && ec == std::errc() && end == part.data() + part.size() && v.is_array())
      v = get_item(in, v, Value(index));
    else
      v = v.is_undefined() ? v : get_item(in, v, Value(part));
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

bool run_test(Interpreter& in, const Value& v, CallArgs& a, size_t first_arg) {
  if (a.positional.size() <= first_arg) return v.truthy();
  const Value& name = a.positional[first_arg];
  if (!name.is_string()) in.fail("select: the test name must be a string");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + long(first_arg) + 1, a.positional.end());
  return apply_test(in, name.text(), v, rest);
}

Value select(Interpreter& in, const Value& v, CallArgs& a, bool keep, bool by_attr) {
  Array out;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty() || !a.positional[0].is_string())
      in.fail("selectattr needs an attribute");
    attr = a.positional[0].text();
  }
  if (!v.truthy())
    return Value(std::move(out));  // jinja2: `if value:` first (None selects nothing)
  for (const Value& item : iterate(in, v)) {
    in.step();
    const Value x = by_attr ? attr_of(in, item, attr) : item;
    if (run_test(in, x, a, by_attr ? 1 : 0) == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value map(Interpreter& in, const Value& v, CallArgs& a) {
  Array out;
  const Value* attr = a.get(SIZE_MAX, "attribute");
  const Value* dflt = a.get(SIZE_MAX, "default");
  if (!v.truthy()) return Value(std::move(out));
  for (const Value& item : iterate(in, v)) {
    in.step();
    if (attr) {
      Value x = attr_of(in, item, to_str(*attr).text());
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
      continue;
    }
    if (a.positional.empty() || !a.positional[0].is_string())
      in.fail("map needs a filter name or attribute=");
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    out.push_back(apply_filter(in, a.positional[0].text(), item, rest));
  }
  return Value(std::move(out));
}

Value join(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* sep = a.get(0, "d");
  const Value* attr = a.get(1, "attribute");
  const Str d = sep ? to_str(*sep) : Str();
  Str out;
  bool first = true;
  for (const Value& item : iterate(in, v)) {
    if (!first) out.append(d);
    first = false;
    out.append(to_str(attr ? attr_of(in, item, to_str(*attr).text()) : item));
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

// Case-insensitive ordering, as jinja2's sort, dictsort, unique, min and max default to.
Value sort_key(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value(change_case(v.as_str(), 0)) : v;
}

Value sorted(Interpreter& in, const Value& v, CallArgs& a) {
  Array items = iterate(in, v);
  const bool reverse = flag(a, 0, "reverse"), cs = flag(a, 1, "case_sensitive");
  const Value* attr = a.get(2, "attribute");
  auto key = [&](const Value& x) {
    return sort_key(attr ? attr_of(in, x, to_str(*attr).text()) : x, cs);
  };
  if (items.size() > 100000) in.fail("sort: too many items");
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(in, key(y), key(x)) : less(in, key(x), key(y));
  });
  return Value(std::move(items));
}

Value dictsort(Interpreter& in, const Value& v, CallArgs& a) {
  if (!v.is_object()) in.fail("dictsort expects a dict");
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* by = a.get(1, "by");
  const bool by_value = by && by->is_string() && by->text() == "value";
  const bool reverse = flag(a, 2, "reverse");
  Array items;
  const Object& o = v.as_object();
  for (size_t i = 0; i < o.items.size(); ++i)
    items.push_back(Value(Array{o.key(i), o.items[i].second}));
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(x.as_array()[by_value], cs),
                ky = sort_key(y.as_array()[by_value], cs);
    return reverse ? less(in, ky, kx) : less(in, kx, ky);
  });
  return Value(std::move(items));
}

Value unique(Interpreter& in, const Value& v, CallArgs& a) {
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* attr = a.get(1, "attribute");
  Array out, seen;
  for (const Value& x : iterate(in, v)) {
    in.step();
    const Value k = sort_key(attr ? attr_of(in, x, to_str(*attr).text()) : x, cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); }))
      continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value(std::move(out));
}

Value extreme(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  const Array items = iterate(in, v);
  if (items.empty()) return Value::undefined("no items");
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* attr = a.get(1, "attribute");
  auto key = [&](const Value& x) {
    return sort_key(attr ? attr_of(in, x, to_str(*attr).text()) : x, cs);
  };
  const Value* best = &items[0];
  for (const Value& x : items)
    if (want_max ? less(in, key(*best), key(x)) : less(in, key(x), key(*best))) best = &x;
  return *best;
}

Value to_int(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default");
  const Value dflt = d ? *d : Value(int64_t(0));
  if (v.is_int()) return v;
  if (v.is_bool()) return int64_t(v.as_bool());
  if (v.is_float())
    return std::isfinite(v.as_float()) && std::fabs(v.as_float()) < 9e18
               ? Value(int64_t(v.as_float()))
               : dflt;
  if (v.is_string()) {
    std::string t = v.text();
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(t.c_str(), &end, 10);
    if (end != t.c_str() && *end == '\0' && errno == 0) return int64_t(i);
    const double f = std::strtod(t.c_str(), &end);
    if (end != t.c_str() && *end == '\0' && std::isfinite(f) && std::fabs(f) < 9e18)
      return int64_t(f);
  }
  return dflt;
}

Value to_float(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default");
  if (v.is_number() || v.is_bool()) return v.as_double();
  if (v.is_string()) {
    char* end = nullptr;
    const double f = std::strtod(v.text().c_str(), &end);
    if (end != v.text().c_str() && *end == '\0') return f;
  }
  return d ? *d : Value(0.0);
}

Value first_or_last(Interpreter& in, const Value& v, bool last) {
  if (v.is_string()) {
    const int64_t n = v.length();
    if (n == 0) return Value::undefined("no first item");
    return Value(str_slice(v.as_str(), last ? n - 1 : 0, last ? n : 1, 1, true, true));
  }
  const Array items = iterate(in, v);
  if (items.empty()) return Value::undefined("no first item");
  return last ? items.back() : items.front();
}

Value html_escape(const Value& v) {
  const Str s = to_str(v);
  Str out;
  size_t at = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s.text()[i];
    const char* rep = c == '&'    ? "&amp;"
                      : c == '<'  ? "&lt;"
                      : c == '>'  ? "&gt;"
                      : c == '"'  ? "&#34;"
                      : c == '\'' ? "&#39;"
                                  : nullptr;
    if (!rep) continue;
    out.append(s.substr(at, i - at)).append(Str(rep, s.substr(i, 1).any_input()));
    at = i + 1;
  }
  return Value(out.append(s.substr(at)));
}

// Filters that take the value as text.
Value text_filter(Interpreter& in, std::string_view n, const Value& v, CallArgs& a) {
  const Str s = to_str(v);
  if (n == "trim") {
    CallArgs chars;
    if (const Value* c = a.get(0, "chars")) chars.positional.push_back(*c);
    return get_attr(in, Value(s), "strip").as_function().call(in, chars);
  }
  if (n == "upper") return Value(change_case(s, 1));
  if (n == "lower") return Value(change_case(s, 0));
  if (n == "capitalize") return Value(change_case(s, 2));
  if (n == "title") return Value(change_case(s, 3));
  if (n == "string" || n == "safe") return v.is_string() ? v : Value(s);
  if (n == "escape" || n == "e" || n == "forceescape") return html_escape(v);
  if (n == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char c : s.text()) {
      const bool w = std::isalnum(uint8_t(c)) || c == '_' || uint8_t(c) >= 0x80;
      words += w && !in_word;
      in_word = w;
    }
    return words;
  }
  if (n == "replace") {
    const Value* from = a.get(0, "old");
    const Value* to = a.get(1, "new");
    if (!from || !to) in.fail("replace needs two arguments");
    const Value* c = a.get(2, "count");
    return replace_str(in, s, to_str(*from), to_str(*to), c && c->is_int() ? c->as_int() : -1);
  }
  if (n == "center") {
    const Value* w = a.get(0, "width");
    const int64_t width = w && w->is_int() ? std::min<int64_t>(w->as_int(), 4096) : 80;
    const int64_t pad = std::max<int64_t>(0, width - v.length());
    Str out(std::string(size_t(pad / 2), ' '));
    return Value(out.append(s).append(std::string(size_t(pad - pad / 2), ' ')));
  }
  in.fail("unsupported filter '" + std::string(n) + "'");
}

}  // namespace

bool has_filter(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "tojson",    "trim",   "length", "count",      "join",       "first",       "last",
      "map",       "select", "reject", "selectattr", "rejectattr", "default",     "d",
      "indent",    "safe",   "string", "int",        "float",      "list",        "unique",
      "dictsort",  "upper",  "lower",  "capitalize", "title",      "replace",     "items",
      "wordcount", "abs",    "attr",   "sum",        "min",        "max",         "reverse",
      "sort",      "round",  "format", "escape",     "e",          "forceescape", "center"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Value apply_filter(Interpreter& in, std::string_view n, const Value& v, CallArgs& a) {
  if (n == "default" || n == "d") {
    const Value* d = a.get(0, "default_value");
    const bool boolean = flag(a, 1, "boolean");
    if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value(std::string());
    return v;
  }
  if (n == "tojson") return tojson(in, v, a);
  if (n == "length" || n == "count") {
    const int64_t len = v.length();
    if (len < 0) in.fail("object of type '" + std::string(v.type_name()) + "' has no len()");
    return len;
  }
  if (n == "join") return join(in, v, a);
  if (n == "first" || n == "last") return first_or_last(in, v, n == "last");
  if (n == "map") return map(in, v, a);
  if (n == "select" || n == "reject") return select(in, v, a, n == "select", false);
  if (n == "selectattr" || n == "rejectattr") return select(in, v, a, n == "selectattr", true);
  if (n == "indent") return indent(in, v, a);
  if (n == "int") return to_int(in, v, a);
  if (n == "float") return to_float(in, v, a);
  if (n == "list") return Value(iterate(in, v));
  if (n == "unique") return unique(in, v, a);
  if (n == "dictsort") return dictsort(in, v, a);
  if (n == "sort") return sorted(in, v, a);
  if (n == "min" || n == "max") return extreme(in, v, a, n == "max");
  if (n == "format") return printf_format(in, v, a);
  if (n == "items") {
    if (v.is_undefined()) return Value(Array{});
    if (!v.is_object()) in.fail("items filter expects a dict");
    return get_attr(in, v, "items").as_function().call(in, a);
  }
  if (n == "reverse") {
    if (v.is_string()) return Value(str_slice(v.as_str(), 0, 0, -1, false, false));
    Array items = iterate(in, v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (n == "abs") {
    if (v.is_int() && v.as_int() != INT64_MIN) return std::abs(v.as_int());
    if (v.is_float()) return std::fabs(v.as_float());
    in.fail("abs expects a number");
  }
  if (n == "attr")
    return get_attr(in, v, to_str(a.positional.empty() ? Value() : a.positional[0]).text());
  if (n == "sum") {
    const Value* attr = a.get(0, "attribute");
    const Value* start = a.get(1, "start");
    Value total = start ? *start : Value(int64_t(0));
    for (const Value& x : iterate(in, v)) {
      const Value y = attr ? attr_of(in, x, to_str(*attr).text()) : x;
      if (!(y.is_number() || y.is_bool()) || !(total.is_number() || total.is_bool()))
        in.fail("sum expects numbers");
      total = total.is_float() || y.is_float()
                  ? Value(total.as_double() + y.as_double())
                  : Value(total.as_int() + (y.is_bool() ? y.as_bool() : y.as_int()));
    }
    return total;
  }
  if (n == "round") {
    if (!(v.is_number() || v.is_bool())) in.fail("round expects a number");
    const Value* p = a.get(0, "precision");
    const double scale =
        std::pow(10.0, double(p && p->is_int() ? std::clamp<int64_t>(p->as_int(), 0, 15) : 0));
    return std::nearbyint(v.as_double() * scale) / scale;
  }
  return text_filter(in, n, v, a);
}

}  // namespace tern::jinja
