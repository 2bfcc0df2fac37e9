// The chat-template corpus: every template of llama.cpp's models/templates/
// (tests/fixtures/templates/*.jinja) renders each conversation of
// conversations.json byte for byte as Python's jinja2 did
// (expected/<template>.json, written by scripts/gen_template_corpus.py), or
// fails where jinja2 failed.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tern/jinja/template.h"
#include "testutil.h"

namespace tern::jinja {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

fs::path fixtures() {
  return test::fixture_path("templates");
}

std::string read(const fs::path& p) {
  return test::read_file(p.string());
}

// The instant the generator fixed strftime_now() to (conversations.json "now").
std::time_t fixed_now(const std::string& iso) {
  return test::utc_time(iso, "%Y-%m-%dT%H:%M:%S");
}

Object context(const json& conv, const json& all) {
  Object ctx;
  ctx.set("messages", from_json(conv["messages"], true));
  ctx.set("bos_token", Value(all["bos_token"].get<std::string>()));
  ctx.set("eos_token", Value(all["eos_token"].get<std::string>()));
  if (!conv["tools"].is_null()) ctx.set("tools", from_json(conv["tools"], true));
  if (conv["add_generation_prompt"].get<bool>()) ctx.set("add_generation_prompt", Value(true));
  return ctx;
}

// Where tern follows llama.cpp rather than Python's jinja2 (see the fixtures' README).
const std::map<std::string, std::string> kKnownDifferences = {
    // jinja2's map() returns a generator that json.dumps refuses; llama.cpp's
    // engine (and tern's) gives a list, so the template renders.
    {"llama-cpp-deepseek-r1.jinja/tools", "map() gives a list, not a generator"},
    // "..."|safe makes jinja2 Markup, and Markup + str HTML-escapes the str;
    // llama.cpp's safe is the identity, and so is tern's.
    {"meetkai-functionary-medium-v3.1.jinja/tools", "no Markup escaping after |safe"},
    // A string plus an undefined value: jinja2 raises, llama.cpp's engine
    // (and tern's) gives the string, so these templates render.
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja/tools", "str + undefined is the str"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja/user", "str + undefined is the str"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja/system_user", "str + undefined is the str"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja/multi_turn", "str + undefined is the str"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja/multi_turn_no_gen", "str + undefined is the str"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja/tools", "str + undefined is the str"},
};

struct Tally {
  int same = 0, errors_as_expected = 0, known = 0, failed = 0;
};

void check_template(const fs::path& file, const json& all, Tally& t) {
  const json expected =
      json::parse(read(fixtures() / "expected" / (file.stem().string() + ".json")));
  Options opt;
  opt.now = fixed_now(all["now"]);
  const std::string source = read(file);
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(file.filename().string() + " / " + name);
    if (kKnownDifferences.count(file.filename().string() + "/" + name)) {
      ++t.known;
      continue;
    }
    std::string got, error;
    try {
      got = Template::parse(source, opt).render(context(all["conversations"][name], all)).text();
    } catch (const Error& e) {
      error = e.what();
    }
    if (want.contains("error")) {
      EXPECT_FALSE(error.empty()) << "jinja2 failed (" << want["error"] << ") but tern rendered";
      t.errors_as_expected += !error.empty();
      t.failed += error.empty();
      continue;
    }
    const std::string out = want["output"].get<std::string>();
    const bool ok = error.empty() && got == out;
    t.same += ok;
    t.failed += !ok;
    if (!error.empty()) {
      ADD_FAILURE() << "tern failed: " << error;
    } else if (!ok) {
      size_t at = 0;
      while (at < got.size() && at < out.size() && got[at] == out[at]) ++at;
      const size_t from = at > 60 ? at - 60 : 0;
      ADD_FAILURE() << "differs at byte " << at
                    << "\n  tern:   " << json(got.substr(from, 120)).dump()
                    << "\n  jinja2: " << json(out.substr(from, 120)).dump();
    }
  }
}

TEST(JinjaCorpus, EveryTemplateRendersAsJinja2) {
  const json all = json::parse(read(fixtures() / "conversations.json"));
  Tally t;
  int templates = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fixtures()))
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    ++templates;
    check_template(f, all, t);
  }
  EXPECT_EQ(templates, 71);
  std::printf(
      "[corpus] %d templates: %d renderings identical, %d expected errors, %d known differences, "
      "%d failed\n",
      templates, t.same, t.errors_as_expected, t.known, t.failed);
}

}  // namespace
}  // namespace tern::jinja
