// The audio encoder (ultravox, qwen2a, voxtral heads on a Whisper encoder):
//   - the fp32 reference against llama.cpp's own embeddings (libmtmd, recorded
//     by scripts/oracle/gen_audio_embed.sh into
//     tests/fixtures/audio/audio_embed.json) for the same seeded tiny files,
//     regenerated here in memory;
//   - the int8 path against the reference (relative L2 bound below);
//   - the resumable job against encode, bit for bit;
//   - the loader's refusals, each naming what is wrong.
#include "tern/vision/audio_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "synthetic_audio.h"
#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "tern/vision/audio_mmproj_writer.h"
#include "tern/vision/mmproj_writer.h"
#include "testutil.h"

namespace tern::vision {
namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// The file gen_audio_embed.sh has llama.cpp encode with:
//   tern gen-mmproj --type T --shape tiny --weights f32 --seed 7
AudioMmprojSpec oracle_spec(AudioProjector type) {
  AudioMmprojSpec s = audio_mmproj_preset(type, MmprojShape::Tiny);
  s.matrix_type = DType::F32;
  s.seed = 7;
  return s;
}

struct File {
  std::vector<uint8_t> bytes;
  AudioMmproj load(const AudioMmprojSpec& s) {
    bytes = build_audio_mmproj(s).to_bytes();
    return AudioMmproj::from_memory(bytes, "tiny-audio.gguf");
  }
};

AudioClip clip(const std::string& name) {
  return AudioClip{oracle_audio::make(name), 16000};
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, n = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    n += double(want[i]) * want[i];
  }
  return std::sqrt(d / n);
}

const nlohmann::json& fixture() {
  static const nlohmann::json fx = [] {
    std::ifstream in(test::fixture_path("audio/audio_embed.json"));
    EXPECT_TRUE(in) << "tests/fixtures/audio/audio_embed.json is missing";
    return in ? nlohmann::json::parse(in) : nlohmann::json::object();
  }();
  return fx;
}

class AudioEncoderTypes : public ::testing::TestWithParam<AudioProjector> {};

// The reference, from tern's own log-mel, against llama.cpp's embeddings:
// the kept rows value by value and every chunk's norm and sum. The file's
// matrices are F32, so ggml multiplies in fp32 and the reference emulates
// its one fp16 step (the convolutions' im2col); what is left is fp32
// rounding, ggml's float softmax / GELU, and the 1e-5 between the two
// log-mels.
TEST_P(AudioEncoderTypes, ReferenceMatchesLlamaCpp) {
  const AudioProjector type = GetParam();
  const std::string tname(audio_projector_name(type));
  const nlohmann::json& fx = fixture()[tname];
  ASSERT_TRUE(fx.is_object()) << "no fixture for " << tname;
  File f;
  const AudioMmproj mm = f.load(oracle_spec(type));
  ASSERT_EQ(fx["n_embd"].get<int>(), mm.config().d_out);
  // Two of the five clips per type keep the test quick; every clip is in
  // the fixture (the two-chunk "long" one among those run).
  double worst_row = 0, worst_norm = 0;
  for (const std::string name : {"tone", "long"}) {
    const auto& want = fx["clips"][name];
    const std::vector<MelChunk> mel = whisper_log_mel(oracle_audio::make(name), mm.config().mel());
    ASSERT_EQ(mel.size(), want.size()) << name;
    for (size_t ch = 0; ch < mel.size(); ++ch) {
      const Embeddings got = reference_encode_chunk(mm, mel[ch]);
      const auto& w = want[ch];
      ASSERT_EQ(got.n_tokens, w["tokens"].get<int>()) << name;
      ASSERT_EQ(got.n_tokens, mm.config().tokens_per_chunk());
      double sq = 0, sum = 0;
      for (float v : got.data) {
        sq += double(v) * v;
        sum += v;
      }
      worst_norm = std::max(worst_norm, std::abs(std::sqrt(sq) / w["norm"].get<double>() - 1));
      EXPECT_NEAR(std::sqrt(sq), w["norm"].get<double>(), 2e-5 * w["norm"].get<double>())
          << name << " chunk " << ch;
      EXPECT_NEAR(sum, w["sum"].get<double>(), 2e-5 * w["norm"].get<double>() * got.n_tokens)
          << name << " chunk " << ch;
      for (const auto& [row, values] : w["rows"].items()) {
        const std::vector<float> want_row = values.get<std::vector<float>>();
        const std::vector<float> got_row(
            got.data.begin() + ptrdiff_t(std::stoi(row)) * got.n_embd,
            got.data.begin() + ptrdiff_t(std::stoi(row) + 1) * got.n_embd);
        worst_row = std::max(worst_row, rel_l2(got_row, want_row));
        EXPECT_LT(rel_l2(got_row, want_row), 5e-5) << name << " chunk " << ch << " row " << row;
      }
    }
  }
  std::printf("%s: reference vs llama.cpp: worst row relative L2 %.2e, worst norm %.2e\n",
              tname.c_str(), worst_row, worst_norm);
}

// The int8 path against the reference, whole chunks. Bound: W8A8 with
// per-row activation scales puts ~0.4% relative noise on each product's
// output (int8 steps of 1/127 of a row's max, averaged over the dot
// product), the image encoder measures 1-3% after 2-12 blocks; here a
// 2-block encoder plus the two convolutions and a 1-2 GEMM head is 8-9 int8
// products deep on the longest path, plus the tanh GELU (< 5e-4 per value).
// 5% leaves room for seeds without hiding a wrong layout (which gives ~100%).
constexpr double kInt8RelL2 = 0.05;

TEST_P(AudioEncoderTypes, Int8PathTracksTheReference) {
  File f;
  const AudioMmproj mm = f.load(oracle_spec(GetParam()));
  const AudioEncoder enc = AudioEncoder::from_mmproj(AudioMmproj::from_memory(f.bytes, "tiny"));
  TaskPool pool(2);
  for (const std::string name : {"chirp", "noise"}) {
    const std::vector<MelChunk> mel = whisper_log_mel(oracle_audio::make(name), enc.config().mel());
    const Embeddings want = reference_encode_chunk(mm, mel[0]);
    const Embeddings got = enc.encode_chunk(mel[0], pool);
    ASSERT_EQ(got.n_tokens, want.n_tokens);
    ASSERT_EQ(got.n_embd, want.n_embd);
    const double e = rel_l2(got.data, want.data);
    std::printf("%s %s: int8 vs reference relative L2 %.4f\n",
                std::string(audio_projector_name(GetParam())).c_str(), name.c_str(), e);
    EXPECT_LT(e, kInt8RelL2) << name;
  }
}

// The job, one stage per call in row blocks that do not divide 1500 or
// 3000, over a two-chunk clip: the same rows as encode, bit for bit.
TEST_P(AudioEncoderTypes, JobEqualsEncodeBitForBit) {
  File f;
  const AudioEncoder enc = AudioEncoder::from_mmproj(f.load(oracle_spec(GetParam())));
  TaskPool pool(2);
  auto c = std::make_shared<const AudioClip>(clip("long"));
  const Embeddings want = enc.encode(*c, pool);
  ASSERT_EQ(want.n_tokens, enc.n_output_tokens(*c));
  ASSERT_EQ(want.n_tokens, 2 * enc.tokens_per_chunk());
  AudioEncodeJob job = enc.start_encode(c, 448);
  int calls = 0;
  while (!job.advance(pool, 0.0)) ++calls;
  EXPECT_EQ(job.stages_done(), job.stages_total());
  EXPECT_EQ(job.slices(), calls + 1);
  EXPECT_GT(job.busy_ms(), 0.0);
  EXPECT_GT(job.ms_per_gflop(), 0.0);
  const Embeddings got = job.take();
  ASSERT_EQ(got.n_tokens, want.n_tokens);
  ASSERT_EQ(got.n_embd, want.n_embd);
  EXPECT_EQ(std::memcmp(got.data.data(), want.data.data(), want.data.size() * sizeof(float)), 0);
  EXPECT_THROW(job.take(), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(All, AudioEncoderTypes,
                         ::testing::Values(AudioProjector::Ultravox, AudioProjector::Qwen2a,
                                           AudioProjector::Voxtral),
                         [](const auto& info) {
                           return std::string(audio_projector_name(info.param));
                         });

TEST(AudioEncoder, TokenCountsAndWrapText) {
  File f1, f2, f3;
  const AudioEncoder u = AudioEncoder::from_mmproj(f1.load(oracle_spec(AudioProjector::Ultravox)));
  const AudioEncoder q = AudioEncoder::from_mmproj(f2.load(oracle_spec(AudioProjector::Qwen2a)));
  const AudioEncoder v = AudioEncoder::from_mmproj(f3.load(oracle_spec(AudioProjector::Voxtral)));
  EXPECT_EQ(u.tokens_per_chunk(), 1500 / 4);  // stack 4
  EXPECT_EQ(q.tokens_per_chunk(), 750);       // pool 2
  EXPECT_EQ(v.tokens_per_chunk(), 750 / 2);   // pool 2, stack 2
  EXPECT_EQ(u.begin_text(), "");
  EXPECT_EQ(u.end_text(), "");
  EXPECT_EQ(q.begin_text(), "<|audio_bos|>");
  EXPECT_EQ(q.end_text(), "<|audio_eos|>");
  EXPECT_EQ(v.begin_text(), "[BEGIN_AUDIO]");
  EXPECT_EQ(v.end_text(), "");
  // n_chunks without computing the mel, as whisper_log_mel cuts it.
  for (size_t n : {1u, 150u, 16000u, 479999u, 480000u, 480001u, 495840u, 496000u, 960000u}) {
    const AudioClip c{std::vector<float>(n, 0.0f), 16000};
    EXPECT_EQ(size_t(AudioEncoder::n_chunks(c)), whisper_log_mel(c.samples, MelConfig{}).size())
        << n;
  }
  EXPECT_EQ(AudioEncoder::n_chunks(AudioClip{}), 0);
  EXPECT_EQ(u.n_output_tokens(clip("long")), 2 * 375);
  TaskPool pool(1);
  EXPECT_THROW(u.encode(AudioClip{}, pool), InvalidArgument);
  EXPECT_THROW(u.encode(AudioClip{std::vector<float>(100, 0.0f), 44100}, pool), InvalidArgument);
}

// Each refusal names what is wrong.
void expect_format_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    AudioMmproj::from_memory(bytes, "bad.gguf");
    ADD_FAILURE() << "loaded; expected an error naming " << needle;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AudioMmproj, RefusesBrokenFilesByName) {
  for (const AudioProjector type :
       {AudioProjector::Ultravox, AudioProjector::Qwen2a, AudioProjector::Voxtral}) {
    const std::string victims[] = {
        "a.conv1d.1.weight", "a.blk.1.attn_v.bias", "a.post_ln.bias",
        type == AudioProjector::Qwen2a ? "mm.a.fc.bias" : "mm.a.mlp.1.weight"};
    for (const std::string& victim : victims) {
      AudioMmprojSpec s = oracle_spec(type);
      s.edit = [&](const std::string& name, std::vector<int64_t>&) { return name != victim; };
      expect_format_error(build_audio_mmproj(s).to_bytes(), "'" + victim + "'");
    }
    AudioMmprojSpec s = oracle_spec(type);
    s.edit = [](const std::string& name, std::vector<int64_t>& dims) {
      if (name == "a.blk.0.ffn_up.weight") dims[1] += 1;
      return true;
    };
    expect_format_error(build_audio_mmproj(s).to_bytes(), "'a.blk.0.ffn_up.weight' has shape");
  }
  // Another audio projector llama.cpp runs, refused by name.
  gguf::GgufWriter w = build_audio_mmproj(oracle_spec(AudioProjector::Ultravox));
  w.set_string("clip.projector_type", "glma");
  expect_format_error(w.to_bytes(), "unsupported audio projector type 'glma'");
  // A missing stack factor.
  AudioMmprojSpec s = oracle_spec(AudioProjector::Voxtral);
  gguf::GgufWriter w2 = build_audio_mmproj(s);
  w2.set_u32("clip.audio.projector.stack_factor", 0);
  expect_format_error(w2.to_bytes(), "stack_factor");
}

// The log-mel frames on a pool's workers: the same values as on one thread.
TEST(AudioEncoder, LogMelOnAPoolIsBitIdentical) {
  TaskPool pool(3);
  for (const std::string name : {"click", "long"}) {
    const std::vector<float> s = oracle_audio::make(name);
    const std::vector<MelChunk> one = whisper_log_mel(s, MelConfig{});
    const std::vector<MelChunk> many = whisper_log_mel(s, MelConfig{}, &pool);
    ASSERT_EQ(one.size(), many.size()) << name;
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(
          std::memcmp(one[i].data.data(), many[i].data.data(), one[i].data.size() * sizeof(float)),
          0)
          << name << " chunk " << i;
  }
}

TEST(AudioEncoder, RefusesAWidthOutsideTheInt8Groups) {
  AudioMmprojSpec s = oracle_spec(AudioProjector::Qwen2a);
  s.config.d_model = 48;  // loads (the reference runs it), but rows would not fill 32-groups
  s.config.n_heads = 4;
  File f;
  AudioMmproj mm = f.load(s);
  EXPECT_THROW(AudioEncoder::from_mmproj(std::move(mm)), InvalidArgument);
}

TEST(AudioMmproj, ImageAndAudioFilesAreToldApart) {
  // An image file is not an audio projector ...
  const std::vector<uint8_t> image =
      build_mmproj(mmproj_preset(ProjectorType::Idefics3, MmprojShape::Tiny)).to_bytes();
  expect_format_error(image, "no audio encoder");
  // ... and an audio file is not an image one: the vision loader says so.
  const std::vector<uint8_t> audio =
      build_audio_mmproj(oracle_spec(AudioProjector::Qwen2a)).to_bytes();
  try {
    Mmproj::from_memory(audio, "audio.gguf");
    ADD_FAILURE() << "an audio-only file loaded as an image projector";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("audio encoder only"), std::string::npos) << e.what();
  }
  const std::string dir = ::testing::TempDir();
  write_audio_mmproj(oracle_spec(AudioProjector::Ultravox),
                     dir + "/tern_audio_encoder_test_a.gguf");
  write_mmproj(mmproj_preset(ProjectorType::Gemma3, MmprojShape::Tiny),
               dir + "/tern_audio_encoder_test_v.gguf");
  EXPECT_TRUE(mmproj_has_audio(dir + "/tern_audio_encoder_test_a.gguf"));
  EXPECT_FALSE(mmproj_modalities(dir + "/tern_audio_encoder_test_a.gguf").vision);
  EXPECT_FALSE(mmproj_has_audio(dir + "/tern_audio_encoder_test_v.gguf"));
  EXPECT_TRUE(mmproj_modalities(dir + "/tern_audio_encoder_test_v.gguf").vision);
  EXPECT_EQ(AudioEncoder::load(dir + "/tern_audio_encoder_test_a.gguf").config().d_out, 64);
}

}  // namespace
}  // namespace tern::vision
