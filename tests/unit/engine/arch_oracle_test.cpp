// The architecture oracle: for every case of the generator (llama, llama3,
// qwen2, qwen3, gemma3), tern's logits on a seeded random-weight file against
// llama.cpp's and against an exact fp64 forward pass in Hugging Face's
// conventions. tests/fixtures/arch_golden.json was made by
// scripts/gen_arch_golden.py (its "how" says how); the test regenerates each
// file from its seed (no file is needed; the weights' SHA-256 must match what
// llama.cpp ran on).
//
// Tolerance, as in golden_test.cpp: both engines quantize activations to
// int8, so neither matches the fp64 logits exactly. llama.cpp's error against
// them (RMS over the recorded ids) sets the scale: tern's may be at most 1.5x
// that (plus 0.01 for cases where llama.cpp is nearly exact), and at every
// recorded position tern's argmax is the exact one unless the exact top-2
// margin is under the near-tie threshold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tern/core/task_pool.h"
#include "tern/gguf/gguf.h"
#include "tern/kv/paged_kv.h"
#include "tern/model/gen_arch.h"
#include "tern/model/model.h"
#include "testutil.h"

namespace tern {
namespace {

constexpr double kNearTie = 0.1;  // logits; llama.cpp's own max error is ~0.1-0.17

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    std::ifstream in(test::fixture_path("arch_golden.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

kv::KvConfig kv_config(const ModelConfig& c) {
  kv::KvConfig k;
  k.n_layers = c.n_layers;
  k.n_kv_heads = c.n_kv_heads;
  k.head_dim = c.head_dim;
  k.type = kv::KvType::F16;  // llama.cpp's cache type in the fixture
  k.max_seqs = 4;
  k.max_seq_tokens = 256;
  k.dram_bytes = size_t(32) << 20;
  return k;
}

struct Errors {
  double se_tern = 0, se_llama = 0, max_tern_llama = 0, max_tern_exact = 0;
  size_t n = 0;
  int positions = 0, argmax_agree = 0;
};

// Compares tern's logits rows (all positions of one prompt) with one fixture
// prompt's records; returns the errors summed into e.
void compare(const nlohmann::json& prompt, const StepOutput& out, int entry, Errors& e,
             const std::string& what) {
  for (const auto& r : prompt["positions"]) {
    const int pos = r["pos"].get<int>();
    const auto row = out.row(out.first_row[size_t(entry)] + pos);
    const auto ids = r["ids"].get<std::vector<int32_t>>();
    const auto llama = r["llama"].get<std::vector<double>>();
    const auto exact = r["exact"].get<std::vector<double>>();
    double best = -INFINITY, second = -INFINITY;
    for (size_t i = 0; i < ids.size(); ++i) {
      const double t = row[size_t(ids[i])];
      e.se_tern += (t - exact[i]) * (t - exact[i]);
      e.se_llama += (llama[i] - exact[i]) * (llama[i] - exact[i]);
      e.max_tern_llama = std::max(e.max_tern_llama, std::abs(t - llama[i]));
      e.max_tern_exact = std::max(e.max_tern_exact, std::abs(t - exact[i]));
      ++e.n;
      if (exact[i] > best) {
        second = best;
        best = exact[i];
      } else {
        second = std::max(second, exact[i]);
      }
    }
    const int32_t got = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    ++e.positions;
    if (got == r["exact_argmax"].get<int32_t>()) {
      ++e.argmax_agree;
    } else {
      EXPECT_LT(best - second, kNearTie) << what << " position " << pos << ": tern's argmax " << got
                                         << ", exact " << r["exact_argmax"];
    }
  }
}

class ArchOracle : public ::testing::TestWithParam<std::string> {};

// A generated case's file on disk, loaded, with a KV cache for it.
struct Loaded {
  std::shared_ptr<const gguf::GgufFile> file;
  TaskPool pool{2};
  std::unique_ptr<Model> model;
  std::unique_ptr<kv::PagedKv> kv;
};

std::unique_ptr<Loaded> load_case(const std::string& arch, const nlohmann::json& g) {
  GenArchResult gen = generate_arch_model(arch, g["seed"].get<uint64_t>(), nullptr);
  EXPECT_EQ(gen.weights_sha256, g["weights_sha256"].get<std::string>())
      << arch << ": the generator no longer makes the file llama.cpp ran on";
  const std::string path = test::temp_path("arch-" + arch + ".gguf");
  gen.writer.write(path);
  auto l = std::make_unique<Loaded>();
  l->file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
  l->model = Model::load(l->file, {}, l->pool);
  l->kv = std::make_unique<kv::PagedKv>(kv_config(l->model->config()));
  return l;
}

// Runs every fixture prompt (all positions' logits) and holds tern's error
// against the exact logits to llama.cpp's.
void check_prompts(Loaded& l, const nlohmann::json& prompts, const LoraSelection& lora,
                   const std::string& what) {
  Errors e;
  for (const auto& p : prompts) {
    const auto ids = p["prompt_ids"].get<std::vector<int32_t>>();
    const SeqId s = l.kv->create();
    Batch b;
    b.entries = {{s, ids, LogitsMode::All, {}, lora}};
    StepOutput out;
    l.model->forward(b, *l.kv, out, l.pool);
    l.kv->release(s);
    compare(p, out, 0, e, what);
  }
  const double rms_tern = std::sqrt(e.se_tern / double(e.n));
  const double rms_llama = std::sqrt(e.se_llama / double(e.n));
  std::printf(
      "%-12s vs fp64: RMS tern %.4f, llama.cpp %.4f; max |tern - exact| %.4f, "
      "max |tern - llama.cpp| %.4f; argmax = exact at %d / %d positions\n",
      what.c_str(), rms_tern, rms_llama, e.max_tern_exact, e.max_tern_llama, e.argmax_agree,
      e.positions);
  EXPECT_LT(rms_tern, 1.5 * rms_llama + 0.01) << what;
}

TEST_P(ArchOracle, LogitsMatchLlamaCppAndExactMath) {
  const std::string arch = GetParam();
  const auto& g = golden()["cases"][arch];
  ASSERT_FALSE(g.is_null()) << arch << " is missing from arch_golden.json";
  auto l = load_case(arch, g);
  check_prompts(*l, g["prompts"], {}, arch);
}

// The llama and gemma3 files with a generated LoRA adapter (rank 16 on every linear
// layer) against llama.cpp with that adapter and the exact math with it.
class LoraOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraOracle, LogitsMatchLlamaCppAndExactMath) {
  const std::string arch = GetParam();
  const auto& g = golden()["cases"][arch];
  ASSERT_TRUE(g.contains("lora")) << "run scripts/gen_arch_golden.py --lora";
  const auto& lg = g["lora"];
  auto l = load_case(arch, g);
  GenLoraOptions o;
  o.rank = lg["rank"].get<int>();
  o.seed = lg["seed"].get<uint64_t>();
  GenArchResult gen = generate_lora(*l->file, o);
  ASSERT_EQ(gen.weights_sha256, lg["sha256"].get<std::string>());
  const std::string path = test::temp_path("arch-lora-" + arch + ".gguf");
  gen.writer.write(path);
  const LoraSelection lora{LoraAdapter::load(path, l->model->config()), lg["scale"].get<float>()};
  check_prompts(*l, lg["prompts"], lora, arch + "+lora");
}

INSTANTIATE_TEST_SUITE_P(Cases, ArchOracle, ::testing::ValuesIn(gen_arch_cases()),
                         [](const auto& info) { return info.param; });
// The cases scripts/gen_arch_golden.py records with an adapter (LORA_CASES).
INSTANTIATE_TEST_SUITE_P(Cases, LoraOracle, ::testing::Values("llama", "gemma3"),
                         [](const auto& info) { return info.param; });

// Every generator case has its fixture entry (adding an architecture means
// adding its generator case and re-running scripts/gen_arch_golden.py).
TEST(ArchOracleFixture, CoversEveryGeneratorCase) {
  for (const std::string& c : gen_arch_cases()) {
    EXPECT_TRUE(golden()["cases"].contains(c)) << c;
  }
}

// The seed reproduces the file: same seed, same bytes; another seed, other
// weights.
TEST(ArchOracleFixture, GeneratorIsSeeded) {
  const auto a = generate_arch_model("qwen3", 5, nullptr);
  const auto b = generate_arch_model("qwen3", 5, nullptr);
  const auto c = generate_arch_model("qwen3", 6, nullptr);
  EXPECT_EQ(a.writer.to_bytes(), b.writer.to_bytes());
  EXPECT_NE(a.weights_sha256, c.weights_sha256);
  EXPECT_THROW(generate_arch_model("mamba", 1, nullptr), InvalidArgument);
}

// The benchmark shapes (SmolLM2-360M and 1.7B) are generator cases but not
// oracle cases, and --weights picks the linear layers' type.
TEST(ArchOracleFixture, BenchmarkShapesAndWeightTypes) {
  const auto cases = gen_arch_cases(), all = gen_arch_cases(true);
  EXPECT_EQ(std::count(cases.begin(), cases.end(), "smollm2-1.7b"), 0);
  EXPECT_EQ(std::count(all.begin(), all.end(), "smollm2-360m"), 1);
  EXPECT_EQ(std::count(all.begin(), all.end(), "smollm2-1.7b"), 1);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
    const auto r = generate_arch_model("llama", 3, nullptr, t);
    const std::vector<uint8_t> bytes = r.writer.to_bytes();
    const gguf::GgufFile f = gguf::GgufFile::from_memory(bytes, "gen.gguf");
    const gguf::TensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, t);
    EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->type, t);
  }
}

}  // namespace
}  // namespace tern
