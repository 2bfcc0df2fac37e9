// Seeds for the text targets: JSON schemas using every supported keyword, and
// conversations for each chat-template family (fuzz_chat_template.cpp gives
// the input layout).
#include <string>
#include <utility>
#include <vector>

#include "seeds.h"
#include "tern/tokenizer/charsmap.h"

namespace tern::fuzz {

void json_schema_seeds(const std::string& dir) {
  const char* schemas[] = {
      R"({})",
      R"(true)",
      R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},)"
      R"("age":{"type":"integer","minimum":0,"exclusiveMaximum":150}},"required":["name"],)"
      R"("additionalProperties":false})",
      R"({"type":"array","prefixItems":[{"type":"boolean"},{"type":"null"}],)"
      R"("items":{"type":"number","minimum":-1.5,"maximum":2.5},"minItems":1,"maxItems":4})",
      R"({"anyOf":[{"enum":["a","b",1,null]},{"const":{"k":[1,2]}}],"title":"t"})",
      R"({"oneOf":[{"type":["string","null"]},{"allOf":[{"type":"integer"}]}],"nullable":true})",
      R"({"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}},)"
      R"("$ref":"#/$defs/node"})",
      R"({"definitions":{"x":{"type":"string"}},"type":"object","properties":{"x":{"$ref":)"
      R"("#/definitions/x"},"self":{"$ref":"#"}},"additionalProperties":{"type":"integer"}})",
      R"({"type":"object","properties":{"\u00e9\"key":{"type":"string"},"k2":{"items":false,)"
      R"("type":"array"}},"description":"d","default":{},"examples":[1],"$schema":"s",)"
      R"("$id":"i","$comment":"c","deprecated":false,"readOnly":true,"writeOnly":false})",
  };
  int i = 0;
  for (const char* s : schemas) save_seed(dir, "schema" + std::to_string(i++) + ".json", s);
}

void chat_template_seeds(const std::string& dir) {
  // Flags byte, template source, then items separated by 0x1e.
  const std::string conv =
      "\x1esYou are terse.\x1euHello <|im_end|>\x1e"
      "aHi\x1e"
      "cget_weather\x1f{\"city\":\"Oslo\"}\x1etsunny\x1euThanks";
  const std::string tool =
      "\x1eTget_weather\x1fWeather for a city\x1f"
      R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})";
  const std::pair<const char*, std::string> seeds[] = {
      {"chatml", "{{'<|im_start|>system\\nYou are a helpful AI assistant named SmolLM'}}"},
      {"llama3", "<|start_header_id|>{{role}}<|end_header_id|>"},
      {"gemma", "<start_of_turn>{{role}}"},
      {"llama2", "[INST] <<SYS>>"},
      {"smolvlm", "<|im_start|>User:<end_of_utterance>"},
      {"unknown", "{{ messages }}"},
  };
  for (const auto& [name, src] : seeds) {
    save_seed(dir, std::string(name) + ".txt", "\x01" + src + conv + tool);
    save_seed(dir, std::string(name) + "_plain.txt",
              std::string(1, '\0') + src +
                  "\x1euHi\x1e"
                  "aHello");
  }
  save_seed(dir, "odd_role.txt", std::string("\x01") + "[INST]\x1ernarrator\x1fonce\x1euHi");
}

void jinja_seeds(const std::string& dir) {
  // Templates using each construct, then the shapes that must end in an
  // error (deep nesting, a huge loop, runaway recursion and growth).
  const char* seeds[] = {
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
      "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "{{- bos_token }}{%- set ns = namespace(sys='') -%}{%- for m in messages if m.role != 'x' -%}"
      "{%- if loop.first and m.role == 'system' %}{% set ns.sys = m.content %}{% continue %}"
      "{%- elif m.role == 'user' -%}[INST] {{ ns.sys ~ m.content }} [/INST]{%- else -%}"
      "{{ m.content }}{{ eos_token }}{%- endif -%}{%- endfor -%}",
      "{% macro render(t, i=2) %}{{ t | tojson(indent=i) }}{% endmacro %}{% for t in tools %}"
      "{{ render(t.function) }}{% endfor %}{% for c in messages[-1].tool_calls %}"
      "{{ c.function.arguments | tojson }}{{ c.function.name.upper() }}{% endfor %}",
      "{% set x %}{{ 'a,b'.split(',') | join('-') }}{% endset %}{{ x }}{{ [1,2,3][1:] }}"
      "{{ {'k': none} | dictsort }}{{ 7 // 2 ** 2 }}{{ messages | selectattr('role', 'equalto',"
      " 'user') | map(attribute='content') | list }}{% filter upper %}q{% endfilter %}",
      "{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"
      "{{ strftime_now('%Y') }}{{ x is defined }}{{ raise_exception('stop') }}",
      "{{ ((((((((((((((((((((1)))))))))))))))))))) }}",
      "{% for a in range(1000) %}{% for b in range(1000) %}{{ b }}{% endfor %}{% endfor %}",
      "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}",
      "{{ m }}\x1e{\"m\": {\"k\": [1, 2.5, \"<|im_end|>\", null, true]}}",
  };
  int i = 0;
  for (const char* s : seeds) save_seed(dir, "jinja" + std::to_string(i++) + ".txt", s);
}

void ugm_seeds(const std::string& dir) {
  // Charsmaps Charsmap::build writes (a key extending another, multi-byte
  // keys, a replacement with spaces), each followed by a text.
  const std::vector<std::vector<std::pair<std::string, std::string>>> maps = {
      {{"\xEF\xBC\xA1", "a"}, {"\xEF\xAC\x81", "ab"}},
      {{"a", "b"}, {"ab", "a  b"}, {"\t", " "}},
      {{"\xEF\xBD\xB6", "\xE3\x82\xAB"}, {"\xEF\xBD\xB6\xEF\xBE\x9E", "\xE3\x82\xAC"}},
  };
  const char* texts[] = {
      "\xEF\xBC\xA1"
      "b  ab<u>\xEF\xAC\x81",
      " a\tab  [X]<s>\xF0\x9F\xA6\x8A", "\xEF\xBD\xB6\xEF\xBE\x9E\xEF\xBD\xB6 \xFF\xC3"};
  for (size_t i = 0; i < maps.size(); ++i) {
    const std::string blob = Charsmap::build(maps[i]);
    std::string seed{char(blob.size() & 0xFF), char(blob.size() >> 8)};
    save_seed(dir, "ugm" + std::to_string(i) + ".bin", seed + blob + texts[i]);
  }
}

}  // namespace tern::fuzz
