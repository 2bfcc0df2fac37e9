// LoRA adapters on small generated models:
//  * tern with an adapter matches the scalar path (naive_forward.h) run on a
//    copy of the model with the adapter merged into its weights;
//  * one step serves rows of different adapters (and none): each entry's
//    logits are bit-identical to running it alone;
//  * a mismatched, foreign or corrupt adapter is refused with an error that
//    names the file and the tensor.
#include "tern/model/lora.h"

#include <gtest/gtest.h>

#include <fstream>

#include "naive_forward.h"
#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "tern/model/gen_arch.h"
#include "tern/model/model.h"
#include "testutil.h"
#include "tiny_model.h"

namespace tern {
namespace {

using reference::TestKv;
using test::TinyModelSpec;

struct Base {
  std::string path;
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<Model> model;
};

Base load_base(const TinyModelSpec& spec, const std::string& name, TaskPool& pool) {
  Base b;
  b.path = test::write_tiny_model(spec, name);
  b.file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(b.path));
  b.model = Model::load(b.file, {}, pool);
  return b;
}

std::string write_lora(const gguf::GgufFile& base, int rank, uint64_t seed,
                       const std::string& name) {
  GenLoraOptions o;
  o.rank = rank;
  o.seed = seed;
  const std::string path = test::temp_path(name);
  generate_lora(base, o).writer.write(path);
  return path;
}

// The base file with W + s B A (F32, A and B read from the adapter's own
// file in double) in place of every weight the adapter touches: the
// reference for what the adapter should do.
std::string write_merged(const gguf::GgufFile& base, const LoraAdapter& ad, float user_scale,
                         const std::string& name) {
  const gguf::GgufFile adf = gguf::GgufFile::open(ad.path());
  gguf::GgufWriter w;
  copy_keys(base, w, "");
  for (const gguf::TensorInfo& t : base.tensors()) {
    const LoraMatrix* m = nullptr;
    int layer = -1;
    for (int s = 0; s < kLoraSlots && !m; ++s) {
      if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1 &&
          t.name ==
              "blk." + std::to_string(layer) + "." + lora_slot_tensor(LoraSlot(s)) + ".weight") {
        m = ad.get(layer, LoraSlot(s));
      }
    }
    if (!m) {
      w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes));
      continue;
    }
    auto v = reference::tensor_f32(base, t.name);                   // (n_out, n_in)
    const auto a = reference::tensor_f32(adf, t.name + ".lora_a");  // (rank, n_in)
    const auto b = reference::tensor_f32(adf, t.name + ".lora_b");  // (n_out, rank)
    const float s = ad.scale(*m, user_scale);
    for (int o = 0; o < m->n_out; ++o) {
      for (int i = 0; i < m->n_in; ++i) {
        double acc = 0;
        for (int r = 0; r < m->rank; ++r) {
          acc += double(b[size_t(o) * m->rank + r]) * a[size_t(r) * m->n_in + i];
        }
        v[size_t(o) * m->n_in + i] += float(s * acc);
      }
    }
    w.add_tensor_f32(t.name, t.dims, v);
  }
  const std::string path = test::temp_path(name);
  w.write(path);
  return path;
}

std::vector<float> last_logits(Model& m, kv::PagedKv& kv, TaskPool& pool,
                               const std::vector<int32_t>& toks, LoraSelection lora) {
  TestKv& tkv = static_cast<TestKv&>(kv);
  Batch b;
  b.entries.push_back({tkv.alloc(), toks, LogitsMode::Last, {}, std::move(lora)});
  StepOutput out;
  m.forward(b, kv, out, pool);
  tkv.free(b.entries[0].seq);
  auto r = out.last(0);
  return {r.begin(), r.end()};
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double norm = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    norm += double(want[i]) * want[i];
    err += double(got[i] - want[i]) * (got[i] - want[i]);
  }
  return std::sqrt(err / norm);
}

class LoraArch : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraArch, MatchesMergedWeightsInTheScalarPath) {
  const TinyModelSpec spec{.arch = GetParam()};
  TaskPool pool(2);
  Base base = load_base(spec, "lora_base_" + spec.arch + ".gguf", pool);
  const ModelConfig& c = base.model->config();
  const auto ad = LoraAdapter::load(write_lora(*base.file, 8, 3, "lora_" + spec.arch + ".gguf"), c);
  EXPECT_EQ(ad->n_matrices(), 7 * c.n_layers);
  const float scale = 0.8f;
  const gguf::GgufFile merged =
      gguf::GgufFile::open(write_merged(*base.file, *ad, scale, "merged_" + spec.arch + ".gguf"));
  const std::vector<int32_t> toks = {5, 17, 42, 8, 77, 3, 60, 21, 9, 33, 12};
  TestKv kv(c, 256, 4);
  const auto got = last_logits(*base.model, kv, pool, toks, {ad, scale});
  const auto base_logits = last_logits(*base.model, kv, pool, toks, {});
  const auto want = reference::naive_forward(merged, c, toks);
  // The same budget as the base model's test (int8 activations, 2 layers);
  // the adapter must move the logits by much more than that.
  const double err = rel_l2(got, want), moved = rel_l2(base_logits, want);
  std::printf("%s: relative L2 error vs merged %.5f; without the adapter %.5f\n", spec.arch.c_str(),
              err, moved);
  EXPECT_LT(err, 0.03);
  EXPECT_GT(moved, 3 * err);
  EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
            std::max_element(want.begin(), want.end()) - want.begin());
}

INSTANTIATE_TEST_SUITE_P(Archs, LoraArch, ::testing::Values("llama", "qwen2"));

// One forward over rows of the base, adapter A, adapter B and A at another
// scale: each entry's logits are exactly those of the entry run alone.
TEST(Lora, MixedBatchRowsEachGetTheirOwnAdapter) {
  TaskPool pool(2);
  Base base = load_base({}, "lora_mixed.gguf", pool);
  const ModelConfig& c = base.model->config();
  const auto a = LoraAdapter::load(write_lora(*base.file, 8, 1, "mixed_a.gguf"), c);
  const auto b = LoraAdapter::load(write_lora(*base.file, 16, 2, "mixed_b.gguf"), c);
  const std::vector<LoraSelection> sel = {{}, {a, 1.0f}, {b, 1.0f}, {a, 0.5f}};
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 42, 8, 77}, {3, 60, 21}, {9, 33, 12, 40, 41, 2, 7}, {5, 17, 42, 8, 77}};
  TestKv kv(c, 64, 8);
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < sel.size(); ++i) {
    alone.push_back(last_logits(*base.model, kv, pool, prompts[i], sel[i]));
  }
  EXPECT_NE(alone[0], alone[3]);  // the adapter changes the same prompt's logits
  EXPECT_NE(alone[1], last_logits(*base.model, kv, pool, prompts[1], {b, 1.0f}));
  Batch batch;
  for (size_t i = 0; i < sel.size(); ++i) {
    batch.entries.push_back({kv.alloc(), prompts[i], LogitsMode::Last, {}, sel[i]});
  }
  StepOutput out;
  base.model->forward(batch, kv, out, pool);
  for (size_t i = 0; i < sel.size(); ++i) {
    const auto row = out.last(int(i));
    EXPECT_EQ(std::vector<float>(row.begin(), row.end()), alone[i]) << "entry " << i;
  }
}

// Loads `path` against the tiny llama model and returns the error message.
std::string load_error(const std::string& path) {
  TaskPool pool(1);
  Base base = load_base({}, "lora_refuse_base.gguf", pool);
  try {
    LoraAdapter::load(path, base.model->config());
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

std::string write_adapter(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                          const std::string& arch, const std::string& name) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "adapter");
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", 16.0f);
  for (const auto& [n, dims] : tensors) {
    std::vector<float> v(size_t(dims[0] * dims[1]), 0.01f);
    w.add_tensor_f32(n, dims, v);
  }
  const std::string path = test::temp_path(name);
  w.write(path);
  return path;
}

TEST(Lora, BadAdaptersAreRefusedNamingTheTensor) {
  TaskPool pool(1);
  // An adapter made for a model with another FFN width.
  TinyModelSpec other;
  other.d_ff = 128;
  const std::string other_base = test::write_tiny_model(other, "lora_other_base.gguf");
  const std::string wrong = write_lora(gguf::GgufFile::open(other_base), 8, 1, "wrong.gguf");
  EXPECT_NE(load_error(wrong).find("tensor 'blk.0.ffn_gate.weight.lora_b' must have shape [8, 96]"),
            std::string::npos)
      << load_error(wrong);
  // A truncated file.
  {
    std::ifstream in(wrong, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(test::temp_path("cut.gguf"), std::ios::binary)
        << bytes.substr(0, bytes.size() / 2);
  }
  EXPECT_NE(load_error(test::temp_path("cut.gguf")).find("cut.gguf"), std::string::npos);
  // A model file, not an adapter.
  EXPECT_NE(load_error(other_base).find("not a LoRA adapter"), std::string::npos);
  // Another architecture's adapter.
  EXPECT_NE(load_error(write_adapter({{"blk.0.attn_q.weight.lora_a", {64, 4}},
                                      {"blk.0.attn_q.weight.lora_b", {4, 64}}},
                                     "qwen2", "arch.gguf"))
                .find("architecture 'qwen2'"),
            std::string::npos);
  // A lora_a without its lora_b, and a lora_b without its lora_a.
  EXPECT_NE(load_error(write_adapter({{"blk.1.ffn_up.weight.lora_a", {64, 4}}}, "llama", "a.gguf"))
                .find("'blk.1.ffn_up.weight.lora_a' has no matching"),
            std::string::npos);
  EXPECT_NE(load_error(write_adapter({{"blk.1.ffn_up.weight.lora_b", {4, 96}}}, "llama", "b.gguf"))
                .find("'blk.1.ffn_up.weight.lora_b' has no matching lora_a"),
            std::string::npos);
  // Tensors tern does not adapt, and layers the model does not have.
  EXPECT_NE(load_error(write_adapter({{"output.weight.lora_a", {64, 4}}}, "llama", "out.gguf"))
                .find("tensor 'output.weight.lora_a': adapters on output (the embeddings or the "
                      "output head) are not supported"),
            std::string::npos);
  EXPECT_NE(load_error(write_adapter({{"token_embd.weight.lora_a", {4, 512}}}, "llama", "emb.gguf"))
                .find("tensor 'token_embd.weight.lora_a': adapters on token_embd"),
            std::string::npos);
  EXPECT_NE(
      load_error(write_adapter({{"blk.0.attn_norm.weight.lora_a", {64, 4}}}, "llama", "norm.gguf"))
          .find("adapters apply to a layer's attention and FFN weights"),
      std::string::npos);
  EXPECT_NE(
      load_error(write_adapter({{"blk.9.attn_q.weight.lora_a", {64, 4}}}, "llama", "blk9.gguf"))
          .find("'blk.9.attn_q.weight.lora_a': the model has 2 layers"),
      std::string::npos);
}

}  // namespace
}  // namespace tern
