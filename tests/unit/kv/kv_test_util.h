#pragma once
// Shared by the PagedKv tests: a fake model whose K, V and Q at a position
// are pseudo-random functions of the WHOLE token prefix up to it (as in a
// real transformer), so a block reused for the wrong prefix, or read from the
// wrong place, changes the attention outputs; and a driver that runs forward
// steps over PagedKv exactly as the forward pass will.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "tern/core/half.h"
#include "tern/kv/paged_kv.h"

namespace tern::kv::test {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1).
inline float unit(uint64_t seed) {
  return float(double(mix64(seed) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

struct FakeModel {
  int n_layers = 3, n_kv_heads = 2, head_dim = 16, group = 2;
  int window = 0;  // > 0: every layer is a sliding-window layer of this width
  int n_q() const { return n_kv_heads * group; }
  int kv_dim() const { return n_kv_heads * head_dim; }

  static std::vector<uint64_t> prefix_hashes(std::span<const int32_t> toks) {
    std::vector<uint64_t> h(toks.size());
    uint64_t x = 0x1234;
    for (size_t i = 0; i < toks.size(); ++i)
      h[i] = x = mix64(x ^ (uint64_t(uint32_t(toks[i])) << 1));
    return h;
  }
  // k, v (kv_dim): values in [-2, 2) with one larger outlier channel per head.
  void kv(uint64_t ph, int layer, float* k, float* v) const {
    for (int i = 0; i < kv_dim(); ++i) {
      const uint64_t s = mix64(ph ^ (uint64_t(layer) << 40) ^ uint64_t(i));
      k[i] = 2.0f * unit(s);
      v[i] = 2.0f * unit(s ^ 0x5555);
      if (i % head_dim == 3) k[i] *= 4.0f;
    }
  }
  // q (n_q * head_dim), already scaled by 1/sqrt(head_dim).
  void q(uint64_t ph, int layer, float* out) const {
    const float sc = 1.0f / std::sqrt(float(head_dim));
    for (int i = 0; i < n_q() * head_dim; ++i) {
      out[i] = 1.5f * unit(mix64(ph ^ 0xabcdef ^ (uint64_t(layer) << 36) ^ uint64_t(i))) * sc;
    }
  }
};

inline KvConfig small_config(const FakeModel& fm, KvType type, int block_tokens,
                             size_t dram_blocks) {
  KvConfig c;
  c.n_layers = fm.n_layers;
  c.n_kv_heads = fm.n_kv_heads;
  c.head_dim = fm.head_dim;
  c.type = type;
  c.block_tokens = block_tokens;
  c.max_seqs = 16;
  c.max_seq_tokens = 4096;
  c.dram_bytes =
      dram_blocks *
      KvLayout::make(fm.n_layers, fm.n_kv_heads, fm.head_dim, block_tokens, type).block_bytes;
  return c;
}

// DRAM of `frames` blocks plus staging for `stage_blocks` streamed blocks per
// layer in flight, and a spill file of `flash_blocks` under dir.
inline KvConfig flash_config(const FakeModel& fm, KvType type, int block_tokens, size_t frames,
                             int stage_blocks, int prefetch, const std::string& dir,
                             size_t flash_blocks) {
  KvConfig c = small_config(fm, type, block_tokens, frames);
  const KvLayout L = KvLayout::make(fm.n_layers, fm.n_kv_heads, fm.head_dim, block_tokens, type);
  const int sets = std::min(prefetch + 1, fm.n_layers);
  c.staging_bytes = size_t(stage_blocks) * size_t(sets) * L.slice_bytes;
  c.dram_bytes += c.staging_bytes;
  c.flash_dir = dir;
  c.flash_bytes = flash_blocks * L.block_bytes;
  c.prefetch_layers = prefetch;
  return c;
}

// A conversation: its tokens, prefix hashes and attention outputs by
// (position, layer, q head, dim).
struct Conv {
  std::vector<int32_t> toks;
  std::vector<uint64_t> ph;
  std::vector<float> out;
  std::vector<char> have;  // (position, layer): output computed
  SeqId seq = -1;
  int pos = 0;  // tokens in the KV

  Conv(const FakeModel& fm, std::vector<int32_t> t) : toks(std::move(t)) {
    ph = FakeModel::prefix_hashes(toks);
    out.assign(toks.size() * size_t(fm.n_layers * fm.n_q() * fm.head_dim), 0.0f);
    have.assign(toks.size() * size_t(fm.n_layers), 0);
  }
  std::span<const float> at(const FakeModel& fm, int p, int layer) const {
    const size_t row = size_t(fm.n_q() * fm.head_dim);
    return {out.data() + (size_t(p) * fm.n_layers + layer) * row, row};
  }
};

struct Job {
  Conv* c;
  int n;  // new tokens this step, from c->pos
};

// One forward step over several conversations; reserve() first (throws
// KvFullError / KvIoError like the real thing, before any state changes).
inline void run_step(PagedKv& kv, const FakeModel& fm, std::vector<Job> jobs) {
  for (Job& j : jobs) kv.reserve(j.c->seq, j.n);
  std::vector<SeqId> seqs;
  for (Job& j : jobs) seqs.push_back(j.c->seq);
  kv.begin_step(seqs);
  const int hd = fm.head_dim, nq = fm.n_q(), row = nq * hd;
  std::vector<float> k(size_t(fm.kv_dim())), v(size_t(fm.kv_dim())), q, o;
  for (int l = 0; l < fm.n_layers; ++l) {
    kv.begin_layer(l);
    for (Job& j : jobs) {
      for (int i = 0; i < j.n; ++i) {
        const int p = j.c->pos + i;
        fm.kv(j.c->ph[size_t(p)], l, k.data(), v.data());
        kv.write(j.c->seq, l, p, k.data(), v.data());
      }
    }
    for (Job& j : jobs) {
      q.assign(size_t(j.n * row), 0.0f);
      o.assign(size_t(j.n * row), -7.0f);
      for (int i = 0; i < j.n; ++i) fm.q(j.c->ph[size_t(j.c->pos + i)], l, q.data() + i * row);
      for (int h = 0; h < fm.n_kv_heads; ++h) {
        kv.attend(j.c->seq, l, h, j.c->pos, j.n, fm.group, q.data() + h * fm.group * hd, row,
                  o.data() + h * fm.group * hd, row, fm.window);
      }
      for (int i = 0; i < j.n; ++i) {
        const int p = j.c->pos + i;
        std::copy_n(o.data() + i * row, row,
                    j.c->out.data() + (size_t(p) * fm.n_layers + l) * size_t(row));
        j.c->have[size_t(p) * fm.n_layers + l] = 1;
      }
    }
  }
  kv.end_step();
  for (Job& j : jobs) {
    kv.commit(j.c->seq, std::span<const int32_t>(j.c->toks).subspan(size_t(j.c->pos), size_t(j.n)));
    j.c->pos += j.n;
  }
}

// A verbatim copy of the plain path's contiguous kernel
// (kernels_ref.cpp attention_f16_ref): the oracle for bit-exact f16 tests.
inline void attention_f16_contiguous(const float* q, const uint16_t* k, const uint16_t* v, int n_kv,
                                     int head_dim, int64_t stride, float* out) {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  for (int j = 0; j < head_dim; ++j) out[j] = 0.0f;
  for (int t = 0; t < n_kv; ++t) {
    const uint16_t* kt = k + t * stride;
    const uint16_t* vt = v + t * stride;
    float s = 0.0f;
    for (int j = 0; j < head_dim; ++j) s += q[j] * fp16_to_f32(kt[j]);
    const float m_new = std::max(m, s);
    const float corr = std::exp(m - m_new);
    const float p = std::exp(s - m_new);
    l = l * corr + p;
    for (int j = 0; j < head_dim; ++j) out[j] = out[j] * corr + p * fp16_to_f32(vt[j]);
    m = m_new;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int j = 0; j < head_dim; ++j) out[j] *= inv;
}

// The plain path for a conversation: (n, kv_dim) fp16 rows per layer, read
// by the contiguous kernel. Fills c.out for every position and layer.
inline void plain_f16_outputs(const FakeModel& fm, Conv& c) {
  const int n = int(c.toks.size()), kvd = fm.kv_dim(), hd = fm.head_dim, row = fm.n_q() * hd;
  std::vector<float> k(static_cast<size_t>(kvd)), v(static_cast<size_t>(kvd)),
      q(static_cast<size_t>(row));
  for (int l = 0; l < fm.n_layers; ++l) {
    std::vector<uint16_t> K(size_t(n) * kvd), V(size_t(n) * kvd);
    for (int p = 0; p < n; ++p) {
      fm.kv(c.ph[size_t(p)], l, k.data(), v.data());
      for (int i = 0; i < kvd; ++i)
        K[size_t(p) * kvd + i] = f32_to_fp16(k[i]), V[size_t(p) * kvd + i] = f32_to_fp16(v[i]);
    }
    for (int p = 0; p < n; ++p) {
      fm.q(c.ph[size_t(p)], l, q.data());
      for (int h = 0; h < fm.n_q(); ++h) {
        const int kvh = h / fm.group;
        const int lo = fm.window > 0 ? std::max(0, p + 1 - fm.window) : 0;  // window start
        attention_f16_contiguous(q.data() + h * hd, K.data() + size_t(lo) * kvd + kvh * hd,
                                 V.data() + size_t(lo) * kvd + kvh * hd, p + 1 - lo, hd, kvd,
                                 c.out.data() + (size_t(p) * fm.n_layers + l) * row + h * hd);
      }
      c.have[size_t(p) * fm.n_layers + l] = 1;
    }
  }
}

// Positions [from, to) of a and b hold bit-identical outputs, every layer.
inline bool same_outputs(const FakeModel& fm, const Conv& a, const Conv& b, int from, int to) {
  for (int p = from; p < to; ++p) {
    for (int l = 0; l < fm.n_layers; ++l) {
      if (!a.have[size_t(p) * fm.n_layers + l] || !b.have[size_t(p) * fm.n_layers + l])
        return false;
      const auto x = a.at(fm, p, l), y = b.at(fm, p, l);
      if (std::memcmp(x.data(), y.data(), x.size_bytes()) != 0) return false;
    }
  }
  return true;
}

// Creates c's sequence, attaches its cached prefix, and runs the rest in chunks.
inline int run_conv(PagedKv& kv, const FakeModel& fm, Conv& c, int chunk, bool use_cache = true) {
  c.seq = kv.create();
  c.pos = use_cache ? kv.attach_prefix(c.seq, c.toks) : 0;
  const int reused = c.pos;
  while (c.pos < int(c.toks.size())) {
    run_step(kv, fm, {{&c, std::min(chunk, int(c.toks.size()) - c.pos)}});
  }
  return reused;
}

inline std::vector<int32_t> tokens(uint64_t seed, int n, int vocab = 1000) {
  std::vector<int32_t> t(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    t[size_t(i)] = int32_t(mix64(seed * 1000003u + uint64_t(i)) % uint64_t(vocab));
  return t;
}

// A fresh folder for spill files, removed (with its contents) on destruction.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name) {
    path = (std::filesystem::temp_directory_path() /
            ("tern-kv-test-" + std::to_string(::getpid()) + "-" + name))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  size_t n_files() const {
    size_t n = 0;
    for (auto& e : std::filesystem::directory_iterator(path)) n += e.is_regular_file() ? 1 : 0;
    return n;
  }
};

}  // namespace tern::kv::test
