// Loading LoRA adapters (llama.cpp's GGUF adapter format) and adding their
// low-rank terms to a batch's rows.
#include "tern/model/lora.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/core/sha256.h"
#include "tern/core/task_pool.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/packed.h"

namespace tern {
namespace {

constexpr const char* kSlotTensor[kLoraSlots] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                 "ffn_gate", "ffn_up", "ffn_down"};

// (n_out, n_in) of a slot's base weight.
std::pair<int, int> slot_shape(const ModelConfig& c, LoraSlot s) {
  switch (s) {
    case LoraSlot::Q:
      return {c.q_dim(), c.d_model};
    case LoraSlot::K:
    case LoraSlot::V:
      return {c.kv_dim(), c.d_model};
    case LoraSlot::O:
      return {c.d_model, c.q_dim()};
    case LoraSlot::Gate:
    case LoraSlot::Up:
      return {c.d_ff, c.d_model};
    case LoraSlot::Down:
      return {c.d_model, c.d_ff};
  }
  return {0, 0};
}

// "blk.<layer>.<slot tensor>.weight" -> (layer, slot); false for anything else.
bool parse_base_name(const std::string& name, int& layer, LoraSlot& slot) {
  int l = -1, end = 0;
  if (std::sscanf(name.c_str(), "blk.%d.%n", &l, &end) != 1 || end == 0 || l < 0) return false;
  const std::string rest = name.substr(size_t(end));
  for (int s = 0; s < kLoraSlots; ++s) {
    if (rest == std::string(kSlotTensor[s]) + ".weight") {
      layer = l;
      slot = LoraSlot(s);
      return true;
    }
  }
  return false;
}

std::vector<float> read_f32(const gguf::TensorInfo& t, const std::string& path) {
  if (!kernels::can_dequantize(t.type)) {
    throw FormatError(path + ": tensor '" + t.name + "' has type " + dtype_label(t.type) +
                      ", which tern cannot load yet (it loads " + kernels::loadable_types() + ")");
  }
  std::vector<float> v(size_t(t.n_elements()));
  kernels::dequantize_row(t.type, t.data, v.data(), t.n_elements());
  for (float x : v) {
    if (!std::isfinite(x)) throw FormatError(path + ": tensor '" + t.name + "' holds NaN or inf");
  }
  return v;
}

// A (rank, n_in) and B (n_out, rank), fp32 as the file holds them, into the
// int8 tile layout; B's rows are zero-padded to a whole group, or for a
// rank of at most 16 packed two to a group (LoraMatrix::b_pairs).
LoraMatrix pack_lora(const std::vector<float>& a, const std::vector<float>& b, int rank, int n_in,
                     int n_out) {
  constexpr int kHalf = kernels::kGroup / 2;
  const bool pairs = rank <= kHalf;
  const int kp = lora_rank_padded(rank), rows = pairs ? (n_out + 1) / 2 : n_out;
  std::vector<float> bp(size_t(rows) * size_t(kp), 0.0f);
  for (int o = 0; o < n_out; ++o) {
    float* dst =
        pairs ? bp.data() + size_t(o / 2) * kp + (o % 2) * kHalf : bp.data() + size_t(o) * kp;
    std::copy_n(b.data() + size_t(o) * rank, rank, dst);
  }
  using kernels::WeightFormat;
  LoraMatrix m{rank, n_in, n_out,
               kernels::pack_matrix(DType::F32, a.data(), rank, n_in, WeightFormat::Int8Sym),
               kernels::pack_matrix(DType::F32, bp.data(), rows, kp, WeightFormat::Int8Sym)};
  m.b_pairs = pairs;
  return m;
}

}  // namespace

const char* lora_slot_tensor(LoraSlot s) {
  return kSlotTensor[int(s)];
}

size_t lora_max_file_bytes(const ModelConfig& base) {
  size_t per_layer = 0;  // every slot at the largest rank, fp32
  for (int s = 0; s < kLoraSlots; ++s) {
    const auto [n_out, n_in] = slot_shape(base, LoraSlot(s));
    per_layer += size_t(kMaxLoraRank) * size_t(n_in + n_out) * sizeof(float);
  }
  return size_t(base.n_layers) * per_layer + (size_t(16) << 20);  // + metadata
}

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& path,
                                                     const ModelConfig& base) {
  // Mapped (opened without blocking, regular files only) and sized before
  // anything is parsed: hashing or reading a file larger than any adapter for
  // this model could be is never started.
  const MappedFile mapped = MappedFile::open(path);
  if (mapped.size() > lora_max_file_bytes(base)) {
    throw FormatError(path + ": " + std::to_string(mapped.size() >> 20) +
                      " MiB is larger than any LoRA adapter for this model can be (" +
                      std::to_string(lora_max_file_bytes(base) >> 20) + " MiB)");
  }
  const gguf::GgufFile f = gguf::GgufFile::from_memory(mapped.bytes(), path);
  auto fail = [&](const std::string& what) { return FormatError(path + ": " + what); };
  if (f.get_string_or("general.type", "") != "adapter" ||
      f.get_string_or("adapter.type", "") != "lora") {
    throw fail("not a LoRA adapter (general.type must be 'adapter', adapter.type 'lora')");
  }
  const std::string arch = f.get_string_or("general.architecture", "");
  if (arch != base.arch) {
    throw fail("adapter is for architecture '" + arch + "', the model is '" + base.arch + "'");
  }
  auto ad = std::make_shared<LoraAdapter>();
  ad->path_ = path;
  ad->alpha_ = f.get_f32_or("adapter.lora.alpha", 0.0f);
  if (!std::isfinite(ad->alpha_)) throw fail("adapter.lora.alpha is not finite");
  ad->layers_.resize(size_t(base.n_layers));
  for (const gguf::TensorInfo& t : f.tensors()) {
    const bool is_a = t.name.ends_with(".lora_a"), is_b = t.name.ends_with(".lora_b");
    if (!is_a && !is_b) throw fail("tensor '" + t.name + "' is not a .lora_a or .lora_b tensor");
    const std::string base_name = t.name.substr(0, t.name.size() - 7);
    int layer = 0;
    LoraSlot slot{};
    if (base_name == "token_embd.weight" || base_name == "output.weight") {
      throw fail("tensor '" + t.name + "': adapters on " +
                 base_name.substr(0, base_name.size() - 7) +
                 " (the embeddings or the output head) are not supported; tern applies them to "
                 "a layer's attention and FFN weights only");
    }
    if (!parse_base_name(base_name, layer, slot)) {
      throw fail("tensor '" + t.name +
                 "': adapters apply to a layer's attention and FFN weights "
                 "(blk.N.attn_q/attn_k/attn_v/attn_output/ffn_gate/ffn_up/ffn_down.weight)");
    }
    if (layer >= base.n_layers) {
      throw fail("tensor '" + t.name + "': the model has " + std::to_string(base.n_layers) +
                 " layers");
    }
    if (!is_a) continue;  // read with its lora_a
    const gguf::TensorInfo* tb = f.find_tensor(base_name + ".lora_b");
    if (!tb) throw fail("tensor '" + t.name + "' has no matching '" + base_name + ".lora_b'");
    const auto [n_out, n_in] = slot_shape(base, slot);
    const int64_t rank = t.dims.size() == 2 ? t.dims[1] : 0;
    if (t.dims.size() != 2 || t.dims[0] != n_in || rank < 1 || rank > kMaxLoraRank) {
      throw fail("tensor '" + t.name + "' must have shape [" + std::to_string(n_in) +
                 ", rank <= " + std::to_string(kMaxLoraRank) + "] for this model");
    }
    if (tb->dims != std::vector<int64_t>{rank, n_out}) {
      throw fail("tensor '" + tb->name + "' must have shape [" + std::to_string(rank) + ", " +
                 std::to_string(n_out) + "] for this model and its lora_a");
    }
    LoraMatrix& m = ad->layers_[size_t(layer)][size_t(slot)];
    m = pack_lora(read_f32(t, path), read_f32(*tb, path), int(rank), n_in, n_out);
    ++ad->n_matrices_;
    ad->max_rank_ = std::max(ad->max_rank_, m.rank);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {  // every lora_b has its lora_a
    if (t.name.ends_with(".lora_b") &&
        !f.find_tensor(t.name.substr(0, t.name.size() - 7) + ".lora_a")) {
      throw fail("tensor '" + t.name + "' has no matching lora_a");
    }
  }
  if (ad->n_matrices_ == 0) throw fail("adapter has no lora_a/lora_b tensors");
  const auto bytes = f.file_bytes();
  ad->digest_ = sha256(bytes.data(), bytes.size());
  return ad;
}

std::array<uint8_t, 32> lora_salt(const LoraSelection& sel) {
  if (!sel) return {};
  Sha256 h;
  h.update("lora").update(sel.adapter->digest().data(), 32).update(&sel.scale, sizeof(float));
  return h.finish();
}

std::shared_ptr<const LoraAdapter> LoraRegistry::load(const std::string& name,
                                                      const std::string& path,
                                                      const ModelConfig& base) {
  check_name(name);
  if (find(name)) throw InvalidArgument("an adapter named '" + name + "' is already loaded");
  auto ad = LoraAdapter::load(path, base);  // outside the lock: reads the file
  std::lock_guard lock(mu_);
  if (!by_name_.emplace(name, ad).second) {
    throw InvalidArgument("an adapter named '" + name + "' is already loaded");
  }
  return ad;
}

void LoraRegistry::check_name(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 64 &&
                  name.find_first_not_of(
                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789-_.") == std::string::npos;
  // A bad name is not echoed: it may hold a NUL (which would cut the message
  // there) or anything else.
  if (!ok) throw InvalidArgument("an adapter name must be 1..64 letters, digits, '-', '_' or '.'");
}

bool LoraRegistry::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  return by_name_.erase(name) > 0;
}

std::shared_ptr<const LoraAdapter> LoraRegistry::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> LoraRegistry::list() const {
  std::lock_guard lock(mu_);
  return {by_name_.begin(), by_name_.end()};
}

}  // namespace tern
