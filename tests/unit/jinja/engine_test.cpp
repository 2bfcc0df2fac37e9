// The Jinja engine construct by construct: whitespace control, statements,
// expressions, filters, tests, methods, undefined values, errors and limits.
// Expected texts are what Python's jinja2 3.1.6 renders with trim_blocks and
// lstrip_blocks (the chat-template configuration).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tern/jinja/template.h"

namespace tern::jinja {
namespace {

std::string render(std::string_view src, const std::string& ctx_json = "{}", Options o = {}) {
  const Value ctx = from_json(nlohmann::ordered_json::parse(ctx_json), false);
  return Template::parse(src, o).render(ctx.as_object()).text();
}

std::string error_of(std::string_view src, const std::string& ctx_json = "{}", Options o = {}) {
  try {
    render(src, ctx_json, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("{% if true %}x{% endif %}\ny"), "xy");  // the newline after a block tag
  EXPECT_EQ(render("{{ 'x' }}\ny"), "x\ny");                // not after a variable
  EXPECT_EQ(render("  {{ 'v' }}\n"), "  v");  // not for {{ }}; one trailing \n dropped
  EXPECT_EQ(render("a  {%+ if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(render("a {# note #}\nb"), "a b");
  EXPECT_EQ(render("  {# note #}\nb"), "b");
}

TEST(JinjaWhitespace, MinusMarkers) {
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("a\n{%- if true -%}\n  b\n{%- endif %}"), "ab");
  EXPECT_EQ(render("x\r\ny"), "x\ny");
}

TEST(JinjaStatements, IfElifElse) {
  const char* t = "{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(render(t, R"({"n":1})"), "one");
  EXPECT_EQ(render(t, R"({"n":2})"), "two");
  EXPECT_EQ(render(t, R"({"n":5})"), "many");
}

TEST(JinjaStatements, ForLoopVariables) {
  EXPECT_EQ(
      render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
             "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
             R"({"xs":["a","b"]})"),
      "1021TrueFalse2;2110FalseTrue2;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}>{{ x }}<{{ loop.nextitem }} {% endfor %}",
                   R"({"xs":[1,2,3]})"),
            ">1<2 1>2<3 2>3< ");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.cycle('a','b') }}{% endfor %}", R"({"xs":[1,2,3]})"),
            "aba");
}

TEST(JinjaStatements, ForElseFilterBreakContinue) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"),
            "2242");
  EXPECT_EQ(render("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(
      render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d":{"b":1,"a":2}})"),
      "b=1,a=2,");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}",
                   R"({"d":{"x":1,"y":2}})"),
            "xy[h][é]");
}

TEST(JinjaStatements, LoopScopeAndNamespace) {
  // A set inside a loop does not leak out; a namespace attribute does.
  EXPECT_EQ(render("{% set a = 0 %}{% set ns = namespace(a=0) %}{% for x in [1,2] %}"
                   "{% set a = a + x %}{% set ns.a = ns.a + x %}{% endfor %}{{ a }} {{ ns.a }}"),
            "0 3");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set x %}in {{ 'block' }}{% endset %}[{{ x }}]"), "[in block]");
  EXPECT_EQ(render("{% set x | upper %}abc{% endset %}{{ x }}"), "ABC");
  EXPECT_NE(error_of("{% set d = {} %}{% set d.x = 1 %}").find("non-namespace"), std::string::npos);
}

TEST(JinjaStatements, MacrosAndCallBlocks) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('a') }} {{ greet('b', punct='?') }} {{ greet(name='c') }}"),
            "hi a! hi b? hi c!");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}"
                   "{% endif %}{% endmacro %}{{ fact(5) }}"),
            "120");
  EXPECT_EQ(render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                   "{% call wrap('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(v) each([1,2]) %}({{ v }}){% endcall %}"),
            "(1)(2)");
  // Macros see the template's top-level variables, not the caller's loop variables.
  EXPECT_EQ(render("{% macro m() %}{{ x }}{% endmacro %}{% set x = 3 %}{% for x in [7] %}{{ m() }}"
                   "{% endfor %}"),
            "3");
}

TEST(JinjaStatements, FilterAndGenerationBlocks) {
  EXPECT_EQ(render("{% filter upper %}abc {{ 'd' }}{% endfilter %}"), "ABC D");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(JinjaExpressions, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }}"),
            "7 9 3 -4 2");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 0.00001 }} {{ 1e16 }}"),
            "3.5 2.0 1024 2.5 1e-05 1e+16");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none }}"), "ababab [1, 2] a1None");
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
}

TEST(JinjaExpressions, ComparisonsLogicAndConditionals) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }}"),
            "True False True True");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not none }} {{ 'k' in {'k': 1} }}"),
            "x y True True");
  EXPECT_EQ(render("[{{ 'a' if false }}] {{ 'a' if false else 'b' }} {{ 1 == 1.0 }}"), "[] b True");
}

TEST(JinjaExpressions, LiteralsAccessAndSlices) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0] }} {{ {'k': 'v'} }} {{ (1, 2) }}"),
            "[1, 'a', None, True, 1.0] {'k': 'v'} [1, 2]");
  EXPECT_EQ(render("{{ xs[-1] }} {{ xs[1:] }} {{ xs[::-1] }} {{ s[1:3] }} {{ s[-2:] }}",
                   R"({"xs":[1,2,3],"s":"héllo"})"),
            "3 [2, 3] [3, 2, 1] él lo");
  EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} [{{ m.missing }}] {{ xs.0 }}",
                   R"({"m":{"role":"user"},"xs":[9]})"),
            "user user [] 9");
  EXPECT_EQ(render("{{ \"it's\" }} {{ 'a\\n'|length }} {{ 'x' 'y' }}"), "it's 2 xy");
}

TEST(JinjaTests, IsTests) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}"
                   "{{ 1 is number }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}"
                   "{{ true is boolean }}{{ true is true }}{{ 0 is false }}{{ 4 is even }}"
                   "{{ 3 is odd }}{{ 6 is divisibleby 3 }}{{ 'a' is equalto 'a' }}"
                   "{{ 1 is not string }}",
                   R"({"x":1})"),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrue");
}

TEST(JinjaFilters, TojsonAsTransformers) {
  const char* ctx = R"({"v":{"b":[1,"é\"\n"],"a":null,"t":true,"f":1.5}})";
  EXPECT_EQ(render("{{ v|tojson }}", ctx),
            R"({"b": [1, "é\"\n"], "a": null, "t": true, "f": 1.5})");
  EXPECT_EQ(render("{{ v.b|tojson(indent=2) }}", ctx), "[\n  1,\n  \"é\\\"\\n\"\n]");
  EXPECT_EQ(render("{{ v|tojson(sort_keys=true, separators=(',', ':')) }}", ctx),
            R"({"a":null,"b":[1,"é\"\n"],"f":1.5,"t":true})");
  EXPECT_EQ(render("{{ 'é😀'|tojson(ensure_ascii=true) }}"), R"("\u00e9\ud83d\ude00")");
}

TEST(JinjaFilters, TextAndSequenceFilters) {
  EXPECT_EQ(
      render("[{{ '  a b \n'|trim }}] {{ 'ab'|upper }} {{ 'Hello World'|lower }} "
             "{{ 'hello world'|title }} {{ 'hELLO'|capitalize }} {{ 'aXa'|replace('a', 'b') }}"),
      "[a b] AB hello world Hello World Hello bXb");
  EXPECT_EQ(render("{{ xs|join(', ') }} {{ xs|first }} {{ xs|last }} {{ xs|length }} "
                   "{{ xs|reverse|list }} {{ xs|sort|list }} {{ ['b','A','a']|unique|list }}",
                   R"({"xs":["b","a","c"]})"),
            "b, a, c b c 3 ['c', 'a', 'b'] ['a', 'b', 'c'] ['b', 'A']");
  EXPECT_EQ(render("{{ ms|map(attribute='role')|join }} {{ ms|selectattr('role', 'equalto', "
                   "'u')|list|length }}"
                   " {{ ms|rejectattr('role', 'equalto', 'u')|map(attribute='role')|first }}"
                   " {{ [1,2,3,4]|select('odd')|list }} {{ [0,1,'']|reject|list }}",
                   R"({"ms":[{"role":"u"},{"role":"a"}]})"),
            "ua 1 a [1, 3] [0, '']");
  EXPECT_EQ(render("[{{ x|default('d') }}] [{{ ''|default('d', true) }}] {{ '3'|int + 1 }} "
                   "{{ 'x'|int(7) }} {{ '2.5'|float }} {{ {'b':1,'a':2}|dictsort }} {{ "
                   "{'k':1}|items|list }}"),
            "[d] [d] 4 7 2.5 [['a', 2], ['b', 1]] [['k', 1]]");
  EXPECT_EQ(render("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}"),
            "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(
      render("{{ 'one two  three'|wordcount }} {{ [1,2,3]|sum }} {{ [3,1,2]|max }} {{ -2|abs }}"
             " {{ '%s=%d'|format('a', 3) }} {{ 2.567|round(2) }}"),
      "3 6 3 2 a=3 2.57");
}

TEST(JinjaMethods, StrListDict) {
  EXPECT_EQ(render("[{{ '  x '.strip() }}][{{ 'xxyx'.lstrip('x') }}][{{ 'a\n'.rstrip() }}]"
                   "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a-b-c'.split('-', 1) }}"
                   " {{ 'a-b-c'.rsplit('-', 1) }}"),
            "[x][yx][a]['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b-c'] ['a-b', 'c']");
  EXPECT_EQ(
      render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.find('c') }}"
             " {{ '{} and {name}'.format(1, name='n') }} {{ 'abc'.upper() }} {{ "
             "'-'.join(['a','b']) }}"),
      "TrueTrue2 1 and n ABC a-b");
  EXPECT_EQ(
      render("{% set xs = [1] %}{% set _ = xs.append(2) %}{{ xs }} {{ xs.pop() }} {{ xs }}"
             " {{ d.get('a') }} {{ d.get('z', 'no') }} {{ d.keys()|list }} {{ d.values()|list }}",
             R"({"d":{"a":1,"b":2}})"),
      "[1, 2] 2 [1] 1 no ['a', 'b'] [1, 2]");
}

TEST(JinjaUndefined, AsJinja2) {
  EXPECT_EQ(render("[{{ nothing }}][{{ nothing|length }}][{% for x in nothing %}x{% endfor %}]"
                   "[{{ d.missing }}][{{ nothing is defined }}]",
                   R"({"d":{}})"),
            "[][0][][][False]");
  EXPECT_NE(error_of("{{ nothing.attr }}").find("'nothing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nothing + 1 }}").find("undefined"), std::string::npos);
  EXPECT_EQ(render("[{{ none.x }}]"), "[]");  // attribute of None is undefined
  // As llama.cpp (not jinja2): a string plus undefined is the string.
  EXPECT_EQ(render("{{ 'a: ' + d.missing }}|{{ nothing + 'b' }}", R"({"d":{}})"), "a: |b");
  EXPECT_NE(error_of("{{ [1] + nothing }}").find("undefined"), std::string::npos);
}

TEST(JinjaGlobals, RangeRaiseAndStrftime) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  EXPECT_EQ(error_of("{{ raise_exception('no system role') }}"),
            "template raised an exception: no system role");
  Options o;
  o.now = 1741338304;  // 2025-03-07 09:05:04 UTC
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %B %d, %Y') }}", "{}", o),
            "2025-03-07 March 07, 2025");
  EXPECT_EQ(render("{{ bos_token }}x", R"({"bos_token":"<s>"})"), "<s>x");
}

TEST(JinjaErrors, NameTheConstructAndLine) {
  EXPECT_EQ(error_of("a\n{% include 'x' %}"), "template line 2: unsupported tag 'include'");
  EXPECT_NE(error_of("{{ x|nosuch }}").find("unsupported filter 'nosuch'"), std::string::npos);
  EXPECT_NE(error_of("{{ x is nosuch }}").find("unsupported test 'nosuch'"), std::string::npos);
  EXPECT_NE(error_of("\n\n{% if x %}").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}").find("missing 'endif'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("{{ (1 }}").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y recursive %}{% endfor %}").find("recursive"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 1 }").find("syntax error"), std::string::npos);
}

TEST(JinjaLimits, NeverCrashOrHang) {
  Options o;
  o.max_steps = 100000;
  // Deep nesting, in the parser and at run time.
  EXPECT_NE(
      error_of("{{" + std::string(5000, '(') + "1" + std::string(5000, ')') + "}}").find("nest"),
      std::string::npos);
  EXPECT_NE(error_of("{{" + std::string(3000, '[') + std::string(3000, ']') + "}}").find("nest"),
            std::string::npos);
  std::string ifs;
  for (int i = 0; i < 3000; ++i) ifs += "{% if true %}";
  EXPECT_NE(error_of(ifs).find("nest"), std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 20000; ++i) chain += " + 1";
  EXPECT_NE(error_of(chain + " }}").find("nested too deeply"), std::string::npos);
  // Huge loops, recursion and growth.
  EXPECT_NE(
      error_of("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
               "{}", o)
          .find("steps"),
      std::string::npos);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("deeper"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}"
                     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("bytes"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("bytes"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000000)|length }}").find("too big"), std::string::npos);
  // A caller() kept past its call block refuses to run.
  EXPECT_NE(
      error_of("{% set ns = namespace() %}{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
               "{% call m() %}x{% endcall %}{{ ns.c() }}")
          .find("after its call block"),
      std::string::npos);
}

}  // namespace
}  // namespace tern::jinja
