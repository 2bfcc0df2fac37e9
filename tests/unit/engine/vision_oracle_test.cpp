// Greedy continuations of prompts with images, and with audio clips, against
// llama.cpp (libmtmd + libllama) on the same pairs: a real text model and a
// seeded random projector of its width, regenerated here with the project's
// writer. tests/fixtures/vision/vlm_greedy.json and
// tests/fixtures/audio/audio_greedy.json were recorded by
// scripts/oracle/gen_vlm_greedy.py [--audio] (see the fixtures' READMEs).
//
// Checked per case: the prompt's tokens (text chunks and media spans) equal
// mtmd's; teacher-forced on llama.cpp's continuation, tern's argmax agrees
// at every step except where llama.cpp itself saw a near-tie; free-running,
// tern's greedy tokens equal llama.cpp's up to the first near-tie. Reported
// like the text model's golden test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "../vision/synthetic_audio.h"
#include "../vision/synthetic_images.h"
#include "tern/core/task_pool.h"
#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/vision/audio_mmproj_writer.h"
#include "tern/vision/mmproj_writer.h"
#include "tern/vision/vlm_text_writer.h"
#include "testutil.h"

namespace tern {
namespace {

constexpr float kNearTie = 1.0f;  // logits, as the text model's golden test

int32_t argmax(std::span<const float> x) {
  return int32_t(std::max_element(x.begin(), x.end()) - x.begin());
}

class VisionOracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    golden_ = new nlohmann::json(nlohmann::json::array());
    for (const char* f : {"vision/vlm_greedy.json", "audio/audio_greedy.json"}) {
      std::ifstream in(test::fixture_path(f));
      nlohmann::json file = nlohmann::json::parse(in);
      for (auto& c : file["cases"]) golden_->push_back(std::move(c));
    }
  }
  static bool audio(const nlohmann::json& c) { return c.contains("clips"); }
  static std::string kind(const nlohmann::json& c) { return audio(c) ? "audio" : "image"; }
  static void TearDownTestSuite() {
    engines_.clear();
    delete golden_;
  }

  static Engine* engine_for(const std::string& name) {
    auto& e = engines_[name];
    if (!e) {
      EngineOptions o;
      if (name == "gemma-3-270m-it-Q4_K_M.gguf") {
        o.model_path = test::gemma3_model_path();
      } else if (name == "SmolLM2-135M-Instruct.Q4_1.gguf") {  // mlp: the plain model
        o.model_path = test::default_model_path();
      } else if (name == "smolvlm-text.gguf") {  // gen-vlm-text on the default model
        if (!test::file_exists(test::default_model_path())) return nullptr;
        o.model_path = test::temp_path(name);
        vision::write_smolvlm_text(test::default_model_path(), o.model_path);
      } else if (name == "smollm2-audio-text.gguf") {  // gen-vlm-text --tokens audio
        if (!test::file_exists(test::default_model_path())) return nullptr;
        o.model_path = test::temp_path(name);
        vision::write_text_with_tokens(test::default_model_path(), o.model_path,
                                       vision::audio_wrap_tokens(), "audio wrapping tokens");
      } else {
        ADD_FAILURE() << "unknown text model " << name;
        return nullptr;
      }
      if (!test::file_exists(o.model_path)) return nullptr;
      o.n_ctx = 2048;  // a 31 s clip through qwen2a: 1500 rows
      o.max_seqs = 2;
      o.kv_type = kv::KvType::F16;  // llama.cpp's default cache
      o.kv_flash_mb = 0;
      e = Engine::load(o);
    }
    return e.get();
  }

  // One case: prefill the prompt (images as rows), then feed `feed` one token
  // a step; returns the argmax after the prompt and after each fed token
  // (free-running when feed is empty: its own argmax is fed back).
  // A case's prompt (media as placeholder spans) and every medium's rows.
  struct Built {
    MediaPrompt p;
    int32_t placeholder = 0;
    std::vector<std::shared_ptr<const vision::Embeddings>> rows;  // per span
  };

  static Built build_image(const nlohmann::json& c, Engine& e) {
    vision::MmprojSpec spec = vision::mmproj_preset(
        *vision::projector_from_name(c["projector"].get<std::string>()), vision::MmprojShape::Tiny);
    spec.seed = c["seed"].get<uint32_t>();
    spec.config.d_out = c["n_embd"].get<int>();
    const std::string path =
        test::temp_path("oracle_" + c["projector"].get<std::string>() + ".gguf");
    vision::write_mmproj(spec, path);
    const auto enc = vision::VisionEncoder::load(path);
    const VisionPrompter prompter(enc, e.tokenizer(), e.config().d_model);
    std::vector<std::shared_ptr<const vision::Image>> images;
    for (const auto& name : c["images"]) {
      oracle_images::Rgb r = oracle_images::make(name.get<std::string>());
      images.push_back(std::make_shared<const vision::Image>(
          vision::Image{r.width, r.height, std::move(r.rgb)}));
    }
    auto source = std::make_shared<vision::EncoderSource>(enc, e.pool());
    const std::vector<TextSegment> text{{c["prompt"].get<std::string>(), true}};
    Built b{prompter.build(text, /*add_bos=*/true, images, source), prompter.placeholder(), {}};
    for (const vision::MediaSpan& m : b.p.media)
      b.rows.push_back(m.source->rows_for(m.hash, *m.image));
    return b;
  }

  // The clip goes where mtmd's one marker is (tern marks clips apart).
  static Built build_audio(const nlohmann::json& c, Engine& e) {
    vision::AudioMmprojSpec spec = vision::audio_mmproj_preset(
        *vision::audio_projector_from_name(c["projector"].get<std::string>()),
        vision::MmprojShape::Tiny);
    spec.seed = c["seed"].get<uint32_t>();
    spec.config.d_out = c["n_embd"].get<int>();
    const std::string path =
        test::temp_path("oracle_" + c["projector"].get<std::string>() + ".gguf");
    vision::write_audio_mmproj(spec, path);
    const auto enc = vision::AudioEncoder::load(path);
    const AudioPrompter prompter(enc, e.tokenizer(), e.config().d_model);
    std::vector<std::shared_ptr<const vision::AudioClip>> clips;
    for (const auto& name : c["clips"])
      clips.push_back(std::make_shared<const vision::AudioClip>(
          vision::AudioClip{oracle_audio::make(name.get<std::string>()), 16000}));
    std::string prompt = c["prompt"].get<std::string>();
    prompt.replace(prompt.find(kMediaMarker), kMediaMarker.size(), kAudioMarker);
    const std::vector<TextSegment> text{{prompt, true}};
    Built b;
    b.p = build_media_prompt(
        e.tokenizer(), text, /*add_bos=*/true, 0, clips.size(), true,
        [&](MediaPrompt& p, bool, size_t k) { prompter.append_audio(p, clips[k], nullptr); });
    b.placeholder = b.p.media.empty() ? 0 : b.p.tokens[size_t(b.p.media[0].pos)];
    for (const vision::MediaSpan& m : b.p.media)
      b.rows.push_back(std::make_shared<const vision::Embeddings>(enc.encode(*m.audio, e.pool())));
    return b;
  }

  // One case: prefill the prompt (media as rows), then feed `feed` one token
  // a step; returns the argmax after the prompt and after each fed token
  // (free-running when feed is empty: its own argmax is fed back).
  static std::vector<int32_t> greedy(const nlohmann::json& c, Engine& e, bool teacher_forced) {
    const Built built = audio(c) ? build_audio(c, e) : build_image(c, e);
    const MediaPrompt& p = built.p;

    // The prompt as mtmd cut it: text chunks' ids, media chunks' sizes.
    std::vector<int32_t> want;
    for (const auto& ch : c["chunks"]) {
      if (ch.is_array()) {
        for (const auto& t : ch) want.push_back(t.get<int32_t>());
      } else {
        want.insert(want.end(), ch[kind(c)].get<size_t>(), built.placeholder);
      }
    }
    EXPECT_EQ(p.tokens, want) << c["prompt"];
    EXPECT_EQ(int(p.tokens.size()), c["n_pos"].get<int>());

    std::vector<EmbeddingRun> runs;
    for (size_t i = 0; i < p.media.size(); ++i) {
      const vision::MediaSpan& m = p.media[i];
      const vision::Embeddings& r = *built.rows[i];
      runs.push_back({m.pos, m.n, r.data.data() + size_t(m.row0) * r.n_embd, m.bidirectional});
    }
    const SeqId seq = e.new_sequence();
    StepOutput out;
    Batch b;
    b.entries.push_back({seq, std::span<const int32_t>(p.tokens), LogitsMode::Last, runs});
    e.step(b, out);
    std::vector<int32_t> got{argmax(out.last(0))};
    const auto ref = c["tokens"].get<std::vector<int32_t>>();
    for (size_t i = 0; i + 1 < ref.size(); ++i) {
      const int32_t next = teacher_forced ? ref[i] : got.back();
      Batch d;
      d.entries.push_back({seq, std::span<const int32_t>(&next, 1), LogitsMode::Last});
      e.step(d, out);
      got.push_back(argmax(out.last(0)));
    }
    e.free_sequence(seq);
    return got;
  }

  static inline nlohmann::json* golden_ = nullptr;
  static inline std::map<std::string, std::unique_ptr<Engine>> engines_;
};

TEST_F(VisionOracle, TeacherForcedGreedyAgreesWithLlamaCpp) {
  int total = 0, agree = 0, cases = 0;
  std::map<std::string, std::pair<int, int>> per_type;  // projector -> (agree, total)
  for (const auto& c : *golden_) {
    Engine* e = engine_for(c["text_model"].get<std::string>());
    if (!e) continue;
    ++cases;
    const auto ref = c["tokens"].get<std::vector<int32_t>>();
    const auto margins = c["margins"].get<std::vector<float>>();
    const auto got = greedy(c, *e, /*teacher_forced=*/true);
    auto& [t_agree, t_total] = per_type[c["projector"].get<std::string>()];
    for (size_t i = 0; i < ref.size(); ++i) {
      ++total;
      ++t_total;
      if (got[i] == ref[i]) {
        ++agree;
        ++t_agree;
      } else {
        EXPECT_LT(margins[i], kNearTie)
            << c["projector"] << " " << c[kind(c) == "audio" ? "clips" : "images"] << " "
            << c["prompt"] << " step " << i << ": tern " << got[i] << ", llama.cpp " << ref[i];
      }
    }
  }
  ASSERT_GT(cases, 0) << "no text model of the fixture found: run scripts/setup.sh";
  std::printf("media prompts, teacher-forced greedy agreement: %d / %d tokens (%.1f%%), %d cases\n",
              agree, total, 100.0 * agree / total, cases);
  for (const auto& [type, at] : per_type)
    std::printf("  %s: %d / %d\n", type.c_str(), at.first, at.second);
  EXPECT_GE(agree, total * 9 / 10);
}

TEST_F(VisionOracle, FreeRunningGreedyMatchesUntilANearTie) {
  int matched = 0, total = 0;
  for (const auto& c : *golden_) {
    Engine* e = engine_for(c["text_model"].get<std::string>());
    if (!e) continue;
    const auto ref = c["tokens"].get<std::vector<int32_t>>();
    const auto margins = c["margins"].get<std::vector<float>>();
    const auto got = greedy(c, *e, /*teacher_forced=*/false);
    size_t i = 0;
    while (i < ref.size() && got[i] == ref[i]) ++i;
    matched += int(i);
    total += int(ref.size());
    if (i < ref.size()) {
      EXPECT_LT(margins[i], kNearTie)
          << c["projector"] << " " << c[kind(c) == "audio" ? "clips" : "images"] << " "
          << c["prompt"] << ": first difference at step " << i;
    }
  }
  std::printf("media prompts, free-running greedy: %d / %d tokens before the first difference\n",
              matched, total);
}

}  // namespace
}  // namespace tern
