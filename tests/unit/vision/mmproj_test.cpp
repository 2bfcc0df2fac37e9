#include "tern/vision/mmproj.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "tern/core/task_pool.h"
#include "tern/vision/encoder.h"
#include "tern/vision/mmproj_writer.h"
#include "testutil.h"

namespace tern::vision {
namespace {

using Tweak = std::function<void(gguf::GgufWriter&)>;

// Builds the file in memory (kept alive in `bytes`) and loads it as "t.gguf".
struct Loaded {
  std::vector<uint8_t> bytes;
  Mmproj load(const MmprojSpec& s, const Tweak& tweak = {}) {
    gguf::GgufWriter w = build_mmproj(s);
    if (tweak) tweak(w);
    bytes = w.to_bytes();
    return Mmproj::from_memory(bytes, "t.gguf");
  }
};

// The FormatError message of loading `s` (after `tweak`), "" if it loads.
std::string load_error(const MmprojSpec& s, const Tweak& tweak = {}) {
  Loaded l;
  try {
    l.load(s, tweak);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

MmprojSpec tiny(ProjectorType t) {
  return mmproj_preset(t, MmprojShape::Tiny);
}

MmprojSpec with_edit(MmprojSpec s, TensorEdit e) {
  s.edit = std::move(e);
  return s;
}

MmprojSpec dropping(ProjectorType t, const std::string& name) {
  return with_edit(tiny(t),
                   [name](const std::string& n, std::vector<int64_t>&) { return n != name; });
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const ProjectorType kTypes[] = {ProjectorType::Idefics3, ProjectorType::Gemma3, ProjectorType::Mlp};

TEST(Mmproj, EveryTinyPresetLoadsAndValidates) {
  for (ProjectorType t : kTypes) {
    for (DType m : {DType::F16, DType::F32, DType::Q8_0}) {
      MmprojSpec s = tiny(t);
      s.matrix_type = m;
      Loaded l;
      const Mmproj mm = l.load(s);
      const VisionConfig& c = mm.config();
      SCOPED_TRACE(std::string(projector_name(t)) + " " + std::string(dtype_name(m)));
      EXPECT_EQ(c.projector, t);
      EXPECT_EQ(c.d_model, 32);
      EXPECT_EQ(c.n_layers, 2);
      EXPECT_EQ(c.head_dim(), 8);
      EXPECT_EQ(c.d_out, 64);
      EXPECT_EQ(c.n_patches(), 16);
      EXPECT_EQ(mm.weights().layers.size(), 2u);
      EXPECT_EQ(mm.weights().layers[1].down_w->dims, (std::vector<int64_t>{64, 32}));
      EXPECT_EQ(mm.weights().layers[1].q_w->type, m);
      EXPECT_NE(mm.weights().patch_w, nullptr);
      EXPECT_EQ(mm.weights().pos_embd->dims[1], c.n_positions());
      EXPECT_EQ(mm.find("v.blk.0.ln1.weight"), mm.weights().layers[0].ln1_w);
    }
  }
}

TEST(Mmproj, ConfigCarriesEachProjectorsData) {
  Loaded a, b, c;
  const Mmproj idefics = a.load(tiny(ProjectorType::Idefics3));
  EXPECT_EQ(idefics.config().merge, 2);
  EXPECT_EQ(idefics.config().n_output_tokens(), 4);
  EXPECT_EQ(idefics.config().ffn, VisionFfn::Gelu);
  EXPECT_TRUE(idefics.config().has_post_ln && idefics.config().has_patch_bias);
  EXPECT_EQ(idefics.config().preproc_image_size, 64);
  Loaded d;
  const Mmproj sized = d.load(tiny(ProjectorType::Idefics3),
                              [](auto& w) { w.set_u32("clip.vision.preproc_image_size", 2048); });
  EXPECT_EQ(sized.config().preproc_image_size, 2048);
  EXPECT_EQ(idefics.weights().fc_w->dims, (std::vector<int64_t>{128, 64}));
  const Mmproj gemma = b.load(tiny(ProjectorType::Gemma3));
  EXPECT_EQ(gemma.config().n_output_tokens(), 4);
  EXPECT_EQ(gemma.weights().input_proj_w->dims, (std::vector<int64_t>{64, 32}));
  const Mmproj llava = c.load(tiny(ProjectorType::Mlp));
  EXPECT_TRUE(llava.config().has_class_embd && llava.config().has_pre_ln);
  EXPECT_FALSE(llava.config().has_post_ln);
  EXPECT_EQ(llava.config().ffn, VisionFfn::GeluQuick);
  EXPECT_EQ(llava.config().n_positions(), 17);
  EXPECT_EQ(llava.config().n_output_tokens(), 16);
  EXPECT_FLOAT_EQ(llava.config().image_mean[0], 0.48145466f);
  EXPECT_EQ(llava.config().d_proj_hidden, 64);
}

TEST(Mmproj, OpensAFileOnDisk) {
  const std::string path = test::temp_path("tiny_gemma3.mmproj.gguf");
  write_mmproj(tiny(ProjectorType::Gemma3), path);
  const Mmproj mm = Mmproj::open(path);
  EXPECT_EQ(mm.config().projector, ProjectorType::Gemma3);
  EXPECT_EQ(mm.file().path(), path);
}

TEST(Mmproj, LegacySwappedFfnNamesAreDetected) {
  MmprojSpec s = tiny(ProjectorType::Mlp);
  s.config.ffn_swapped = true;  // fc1 written as ffn_down, fc2 as ffn_up
  Loaded l;
  const Mmproj mm = l.load(s);
  EXPECT_TRUE(mm.config().ffn_swapped);
  EXPECT_EQ(mm.weights().layers[0].up_w->name, "v.blk.0.ffn_down.weight");
  EXPECT_EQ(mm.weights().layers[0].up_w->dims, (std::vector<int64_t>{32, 64}));
}

TEST(Mmproj, MissingTensorsAreNamed) {
  EXPECT_HAS(load_error(dropping(ProjectorType::Idefics3, "v.blk.1.attn_k.weight")),
             "t.gguf: missing tensor 'v.blk.1.attn_k.weight' (needed by the idefics3");
  EXPECT_HAS(load_error(dropping(ProjectorType::Idefics3, "mm.model.fc.weight")),
             "missing tensor 'mm.model.fc.weight'");
  EXPECT_HAS(load_error(dropping(ProjectorType::Gemma3, "mm.soft_emb_norm.weight")),
             "missing tensor 'mm.soft_emb_norm.weight'");
  EXPECT_HAS(load_error(dropping(ProjectorType::Mlp, "mm.2.bias")), "missing tensor 'mm.2.bias'");
  EXPECT_HAS(load_error(dropping(ProjectorType::Mlp, "v.pre_ln.bias")),
             "missing tensor 'v.pre_ln.bias'");
}

TEST(Mmproj, ShapeMismatchesNameTensorAndShapes) {
  auto reshape = [](ProjectorType t, const std::string& name, std::vector<int64_t> to) {
    return with_edit(tiny(t), [=](const std::string& n, std::vector<int64_t>& d) {
      if (n == name) d = to;
      return true;
    });
  };
  EXPECT_HAS(load_error(reshape(ProjectorType::Idefics3, "v.blk.0.ffn_up.weight", {32, 96})),
             "tensor 'v.blk.0.ffn_up.weight' has shape [32, 96], expected [32, 64]");
  EXPECT_HAS(load_error(reshape(ProjectorType::Mlp, "v.position_embd.weight", {32, 16})),
             "tensor 'v.position_embd.weight' has shape [32, 16], expected [32, 17]");
  EXPECT_HAS(load_error(reshape(ProjectorType::Gemma3, "v.patch_embd.weight", {8, 8, 4, 32})),
             "expected [8, 8, 3, 32]");
}

TEST(Mmproj, UnsupportedTypesAreRefused) {
  MmprojSpec s = tiny(ProjectorType::Gemma3);
  s.embed_type = DType::BF16;
  EXPECT_HAS(load_error(s),
             "tensor 'v.patch_embd.weight' has type BF16, not supported there "
             "(a patch or position embedding must be F32 or F16)");
}

TEST(Mmproj, WrongFileKindsAreRefused) {
  const MmprojSpec s = tiny(ProjectorType::Idefics3);
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_string("clip.projector_type", "resampler"); }),
             "unsupported projector type 'resampler' (supported: idefics3, gemma3, mlp)");
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_string("general.architecture", "llama"); }),
             "not a clip (mmproj) file: general.architecture is 'llama'");
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_bool("clip.has_vision_encoder", false); }),
             "has no vision encoder");
  EXPECT_HAS(
      load_error(tiny(ProjectorType::Mlp),
                 [](auto& w) { w.add_tensor_f32("mm.3.weight", {4}, std::vector<float>(4)); }),
      "(mm.3, Yi-style LLaVA) is not supported");
  EXPECT_HAS(load_error(tiny(ProjectorType::Mlp),
                        [](auto& w) {
                          w.set_i32_array("clip.vision.image_grid_pinpoints", {336, 672});
                        }),
             "LLaVA-1.6 any-resolution files (clip.vision.image_grid_pinpoints) are not supported");
}

TEST(Mmproj, ProjectorTypeFallsBackToTheVisionKey) {
  // Mixed-modality files name it clip.vision.projector_type.
  const MmprojSpec s = tiny(ProjectorType::Gemma3);
  EXPECT_EQ(load_error(s,
                       [](auto& w) {
                         w.set_string("clip.projector_type", "");
                         w.set_string("clip.vision.projector_type", "gemma3");
                       }),
            "");
}

TEST(Mmproj, InconsistentHparamsAreRefused) {
  const MmprojSpec s = tiny(ProjectorType::Idefics3);
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_u32("clip.vision.attention.head_count", 5); }),
             "embedding_length 32 is not divisible by head_count 5");
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_u32("clip.vision.image_size", 36); }),
             "image_size 36 is not a multiple of patch_size 8");
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_u32("clip.vision.projector.scale_factor", 3); }),
             "projector.scale_factor 3 does not divide the 4 patches per side");
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_u32("clip.vision.block_count", 1); }),
             "tensor 'v.blk.1.ln1.weight' is beyond clip.vision.block_count = 1");
  EXPECT_HAS(load_error(s, [](auto& w) { w.set_i32_array("clip.vision.feature_layer", {3}); }),
             "feature_layer 3 is out of range (block_count 2)");
  EXPECT_HAS(load_error(s,
                        [](auto& w) {
                          w.set_f32_array("clip.vision.image_std", {0.5f, 0.0f, 0.5f});
                        }),
             "image_std has a value that is not positive");
  EXPECT_HAS(load_error(s,
                        [](auto& w) {
                          w.set_u32("clip.vision.patch_size", 1);
                          w.set_u32("clip.vision.image_size", 1 << 20);
                        }),
             "image_size / patch_size = 1048576 patches per side, more than 4096");
}

TEST(Mmproj, TruncatedFileIsAFormatError) {
  std::vector<uint8_t> bytes = build_mmproj(tiny(ProjectorType::Mlp)).to_bytes();
  bytes.resize(bytes.size() - 100);
  try {
    Mmproj::from_memory(bytes, "cut.gguf");
    FAIL() << "loaded a truncated file";
  } catch (const FormatError& e) {
    EXPECT_HAS(std::string(e.what()), "cut.gguf: ");
  }
}

// Mutated files load or throw a tern::Error: never crash, never anything else.
TEST(Mmproj, MutatedFilesNeverCrash) {
  std::mt19937 rng(5);
  TaskPool pool(2);
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 600; ++iter) {
    std::vector<uint8_t> b = build_mmproj(tiny(kTypes[iter % 3])).to_bytes();
    // Mutate the metadata and tensor table (the first ~3 KB): that is where
    // the structure is; mutated weights still load.
    for (int k = 0, n = 1 + int(rng() % 4); k < n; ++k) {
      const size_t at = rng() % std::min<size_t>(b.size(), 3000);
      b[at] = rng() % 3 == 0 ? uint8_t(b[at] ^ (1u << (rng() % 8))) : uint8_t(rng());
    }
    try {
      const Mmproj mm = Mmproj::from_memory(b, "m.gguf");
      ++loaded;
      // What loads also encodes (every type runs now): one grey tile.
      if (iter % 4 == 0) {
        const VisionEncoder enc = VisionEncoder::from_mmproj(Mmproj::from_memory(b, "m.gguf"));
        const int S = enc.config().image_size;
        const Embeddings e =
            enc.encode_tile(PixelTile{S, std::vector<float>(size_t(S) * S * 3, 0.25f)}, pool);
        EXPECT_EQ(e.n_tokens, enc.tokens_per_tile());
      }
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(loaded + refused, 600);
  EXPECT_GT(refused, 0);
}

TEST(Mmproj, TextModelWidthMustMatch) {
  Loaded l;
  const Mmproj mm = l.load(tiny(ProjectorType::Idefics3));
  EXPECT_NO_THROW(check_text_model(mm.config(), 64));
  try {
    check_text_model(mm.config(), 576);
    FAIL() << "accepted a mismatched text model";
  } catch (const InvalidArgument& e) {
    EXPECT_HAS(std::string(e.what()),
               "outputs 64-wide embeddings but the text model's n_embd is 576");
  }
}

TEST(Mmproj, RealPresetsDescribeTheRealModels) {
  // Shapes only: writing the real files is for benchmarks (hundreds of MB).
  const VisionConfig smol = mmproj_preset(ProjectorType::Idefics3, MmprojShape::Real).config;
  EXPECT_EQ(smol.n_output_tokens(), 64);
  EXPECT_EQ(smol.d_out, 576);
  const VisionConfig gemma = mmproj_preset(ProjectorType::Gemma3, MmprojShape::Real).config;
  EXPECT_EQ(gemma.n_patches(), 4096);
  EXPECT_EQ(gemma.n_output_tokens(), 256);
  const VisionConfig llava = mmproj_preset(ProjectorType::Mlp, MmprojShape::Real).config;
  EXPECT_EQ(llava.n_positions(), 577);
  EXPECT_EQ(llava.n_output_tokens(), 576);
}

}  // namespace
}  // namespace tern::vision
