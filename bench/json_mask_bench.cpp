// Cost of the JSON-schema token mask with a real vocabulary: 16 sequences,
// each with its own schema, generate by random walks through the mask (as a
// sampler would, but without a model); every step's mask is timed.
//   json_mask_bench [model.gguf] [steps per sequence]
// Prints the trie build time, then the per-mask thread CPU time (mean, p50, p90, p99,
// max) over all sequences and steps, and the per-step cost for all 16.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "tern/gguf/gguf_file.h"
#include "tern/sampling/json_constraint.h"
#include "tern/tokenizer/tokenizer.h"

using namespace tern;
using Clock = std::chrono::steady_clock;

namespace {

const char* const kSchemas[16] = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false})",
    R"({"type":"object"})",
    R"({"type":"array","items":{"type":"string"},"maxItems":8})",
    R"({"type":"object","properties":{"city":{"type":"string"},"temp":{"type":"number"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","temp","unit"],"additionalProperties":false})",
    R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/n"})",
    R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string"}},"required":["kind","y"],"additionalProperties":false}]})",
    R"({"type":"object","properties":{"title":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":4},"done":{"type":"boolean"}},"required":["title","tags","done"],"additionalProperties":false})",
    R"({"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false},"maxItems":5})",
    R"({"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["answer","confidence"],"additionalProperties":false})",
    R"({"type":"object","additionalProperties":{"type":"integer"}})",
    R"({"type":"object","properties":{"email":{"anyOf":[{"type":"string"},{"type":"null"}]},"id":{"type":"integer"}},"required":["email","id"],"additionalProperties":false})",
    R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"items":false})",
    R"({"type":"string","maxLength":64})",
    R"({"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},"result":{"type":"integer"}},"required":["steps","result"],"additionalProperties":false})",
    R"({"enum":["yes","no","maybe"]})",
    R"({"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},"langs":{"type":"array","items":{"enum":["c++","python","rust"]}}},"required":["name","langs"],"additionalProperties":false}},"required":["user"],"additionalProperties":false})",
};

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// This thread's CPU time in ms: on a shared machine, wall time also counts
// the moments the thread was not running.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 64;
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(path));
  const auto t0 = Clock::now();
  std::vector<std::string> pieces(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (!tok.is_control(id)) pieces[size_t(id)] = tok.token_to_piece(id);
  const auto trie = std::make_shared<const TokenTrie>(pieces);
  const auto t1 = Clock::now();
  std::printf("vocabulary %d tokens, trie %zu nodes, built in %.1f ms\n", tok.n_vocab(),
              trie->n_nodes(), ms(t1 - t0));

  std::vector<JsonConstraint> seqs;
  for (const char* s : kSchemas)
    seqs.emplace_back(JsonGrammar::from_schema(s), trie, tok.eog_ids());
  std::mt19937_64 rng(1);
  std::vector<float> logits(size_t(tok.n_vocab()));
  std::vector<double> samples;
  std::vector<double> step_total(size_t(steps), 0.0);
  for (int step = 0; step < steps; ++step) {
    for (auto& c : seqs) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const double a = cpu_ms();
      c.mask(logits);
      const double t = cpu_ms() - a;
      samples.push_back(t);
      step_total[size_t(step)] += t;
      // Random allowed token; past 24 steps, prefer one that ends the value.
      std::vector<int32_t> ok;
      for (int32_t id = 0; id < tok.n_vocab(); ++id)
        if (logits[size_t(id)] == 0.0f) ok.push_back(id);
      if (c.complete()) {
        c.reset();  // finished: start the schema again
        continue;
      }
      int32_t pick = ok[rng() % ok.size()];
      if (step % 32 > 24)
        for (int32_t id : ok)
          if (pieces[size_t(id)].find_first_of("\"}]") != std::string::npos) pick = id;
      c.accept(pick);
    }
  }
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double s : samples) sum += s;
  const auto pct = [&](double p) { return samples[size_t(p * double(samples.size() - 1))]; };
  std::printf(
      "per mask (one sequence, %zu masks): mean %.3f ms  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
      samples.size(), sum / double(samples.size()), pct(0.5), pct(0.9), pct(0.99), samples.back());
  std::sort(step_total.begin(), step_total.end());
  std::printf("per step, all 16 sequences (serial): median %.2f ms  max %.2f ms\n",
              step_total[step_total.size() / 2], step_total.back());
  return 0;
}
