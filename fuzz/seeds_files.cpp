// Seeds for the file-format targets: mmproj and LoRA GGUF files, prefix-cache
// snapshots and embedding-cache entries, each written by tern's own writer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_fixtures.h"
#include "fuzz_util.h"
#include "seeds.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/kernels/dequant.h"
#include "tern/kv/kv_persist.h"
#include "tern/kv/paged_kv.h"
#include "tern/vision/audio_mmproj_writer.h"
#include "tern/vision/mmproj_writer.h"

namespace tern::fuzz {
namespace {

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i));
  return v;
}

// A flags byte, then the file.
std::vector<uint8_t> with_flags(uint8_t flags, const std::vector<uint8_t>& file) {
  std::vector<uint8_t> out{flags};
  out.insert(out.end(), file.begin(), file.end());
  return out;
}

// lora_a {n_in, rank} and lora_b {rank, n_out} for blk.<layer>.<slot>.weight.
void add_pair(gguf::GgufWriter& w, int layer, const char* slot, int n_in, int rank, int n_out,
              DType type) {
  const std::string base = "blk." + std::to_string(layer) + "." + slot + ".weight";
  const auto a = ramp(size_t(n_in) * size_t(rank), 0.1f);
  const auto b = ramp(size_t(rank) * size_t(n_out), 0.05f);
  if (type == DType::F32) {
    w.add_tensor_f32(base + ".lora_a", {n_in, rank}, a);
    w.add_tensor_f32(base + ".lora_b", {rank, n_out}, b);
  } else {
    w.add_tensor(base + ".lora_a", type, {n_in, rank}, kernels::quantize_ref(type, a));
    w.add_tensor(base + ".lora_b", type, {rank, n_out}, kernels::quantize_ref(type, b));
  }
}

}  // namespace

void mmproj_seeds(const std::string& dir) {
  using vision::ProjectorType;
  for (ProjectorType t : {ProjectorType::Idefics3, ProjectorType::Gemma3, ProjectorType::Mlp}) {
    const auto bytes =
        vision::build_mmproj(vision::mmproj_preset(t, vision::MmprojShape::Tiny)).to_bytes();
    save_seed(dir, std::string(vision::projector_name(t)) + ".gguf", bytes);
  }
  // Audio projectors, narrower than the test files to keep the seeds small
  // (the 1500-row position table is most of their bytes).
  using vision::AudioProjector;
  for (AudioProjector t :
       {AudioProjector::Ultravox, AudioProjector::Qwen2a, AudioProjector::Voxtral}) {
    vision::AudioMmprojSpec s = vision::audio_mmproj_preset(t, vision::MmprojShape::Tiny);
    s.config.d_model = 32;
    s.config.d_ff = 32;
    s.config.n_layers = 1;
    s.config.n_heads = 2;
    s.config.d_out = 32;
    s.config.d_proj_hidden = std::min(s.config.d_proj_hidden, 32);
    save_seed(dir, "audio_" + std::string(vision::audio_projector_name(t)) + ".gguf",
              vision::build_audio_mmproj(s).to_bytes());
  }
}

void lora_seeds(const std::string& dir) {
  const ModelConfig c = lora_base();
  auto header = [&](gguf::GgufWriter& w) {
    w.set_string("general.architecture", c.arch);
    w.set_string("general.type", "adapter");
    w.set_string("adapter.type", "lora");
    w.set_f32("adapter.lora.alpha", 8.0f);
  };
  gguf::GgufWriter small;
  header(small);
  add_pair(small, 0, "attn_q", c.d_model, 4, c.q_dim(), DType::F32);
  add_pair(small, 1, "ffn_down", c.d_ff, 2, c.d_model, DType::F32);
  save_seed(dir, "rank_small.gguf", small.to_bytes());
  gguf::GgufWriter wide;  // rank over 16: B rows are not paired
  header(wide);
  add_pair(wide, 0, "attn_k", c.d_model, 20, c.kv_dim(), DType::F16);
  add_pair(wide, 1, "ffn_gate", c.d_model, 32, c.d_ff, DType::Q8_0);
  save_seed(dir, "rank_wide.gguf", wide.to_bytes());
}

void kv_snapshot_seeds(const std::string& dir) {
  const std::string tmp = scratch_dir() + "/kv";
  kv::PagedKv empty(snapshot_kv());
  const auto far = std::chrono::steady_clock::now() + std::chrono::hours(1);
  kv::save_prefix_cache(empty, tmp, size_t(1) << 20, far);
  save_seed(dir, "empty.tkv", with_flags(0, read_bytes(kv::cache_file_path(tmp))));
  kv::PagedKv kv(snapshot_kv());
  std::vector<uint8_t> payload(kv.layout().block_bytes);
  for (uint8_t i = 0; i < 3; ++i) {
    kv::BlockHash h{};
    h[0] = i + 1;
    for (size_t k = 0; k < payload.size(); ++k) payload[k] = uint8_t(k * 13 + i);
    kv.import_cached(h, payload);
  }
  kv::save_prefix_cache(kv, tmp, size_t(1) << 20, far);
  const auto three = read_bytes(kv::cache_file_path(tmp));
  save_seed(dir, "three.tkv", with_flags(0, three));
  save_seed(dir, "three_fixed.tkv", with_flags(3, three));
  save_seed(dir, "three_flash.tkv", with_flags(7, three));
}

void embedding_cache_seeds(const std::string& dir) {
  const std::string tmp = scratch_dir() + "/emb";
  const vision::EmbeddingKey key = embedding_key();
  {
    vision::EmbeddingCache cache({.flash_dir = tmp});
    cache.insert(key, vision::Embeddings{2, 4, ramp(8, 1.0f)});
  }
  const auto file = read_bytes(tmp + "/" + to_hex(key.digest()) + ".emb");
  save_seed(dir, "entry.emb", with_flags(0, file));
  save_seed(dir, "entry_fixed.emb", with_flags(3, file));
}

}  // namespace tern::fuzz
