// Scalar block-attention kernels (the oracle), and the choice of the table
// per instruction set, which follows kernels' single dispatch point.
#include "tern/kv/kv_attend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "tern/core/cpu.h"
#include "tern/core/half.h"
#include "tern/core/log.h"
#include "tern/kernels/ops.h"

namespace tern::kv {
namespace {

inline float load_f16(const uint8_t* p, int j) {
  uint16_t h;
  std::memcpy(&h, p + 2 * j, 2);
  return fp16_to_f32(h);
}

// s = q . k_t for each key type. Quantized keys: the scale multiplies the
// integer dot product once.
template <KvType T>
float key_dot(const KvLayout& L, const HeadBlock& hb, int t, const float* q) {
  const int n = L.head_dim;
  const uint8_t* k = hb.k + size_t(t) * L.k_row;
  float s = 0.0f;
  if constexpr (T == KvType::F16) {
    for (int j = 0; j < n; ++j) s += q[j] * load_f16(k, j);
    return s;
  } else if constexpr (T == KvType::Int4Fp8) {
    const int half = n / 2;
    for (int j = 0; j < half; ++j) s += q[j] * float(int(k[j] & 15) - 8);
    for (int j = 0; j < half; ++j) s += q[j + half] * float(int(k[j] >> 4) - 8);
    return s * hb.ks[t];
  } else {
    for (int j = 0; j < n; ++j) s += q[j] * float(int8_t(k[j]));
    return s * hb.ks[t];
  }
}

// acc = acc * corr + p * v_t
template <KvType T>
void value_axpy(const KvLayout& L, const HeadBlock& hb, int t, float corr, float p, float* acc) {
  const int n = L.head_dim;
  const uint8_t* v = hb.v + size_t(t) * L.v_row;
  if constexpr (T == KvType::F16) {
    for (int j = 0; j < n; ++j) acc[j] = acc[j] * corr + p * load_f16(v, j);
  } else if constexpr (T == KvType::Int8) {
    const float pv = p * hb.vs[t];
    for (int j = 0; j < n; ++j) acc[j] = acc[j] * corr + pv * float(int8_t(v[j]));
  } else {
    const float pv = p * hb.vs[t];
    for (int j = 0; j < n; ++j) acc[j] = acc[j] * corr + pv * fp8_decode(v[j]);
  }
}

// Token-by-token online softmax, in the order of kernels::attention_f16_ref.
template <KvType T>
void attend_block_ref(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* q,
                      float* m_io, float* l_io, float* acc) {
  float m = *m_io, l = *l_io;
  for (int t = 0; t < n_tok; ++t) {
    const float s = key_dot<T>(L, hb, t, q);
    const float m_new = std::max(m, s);
    const float corr = std::exp(m - m_new);  // 0 on the first token
    const float p = std::exp(s - m_new);
    l = l * corr + p;
    value_axpy<T>(L, hb, t, corr, p, acc);
    m = m_new;
  }
  *m_io = m;
  *l_io = l;
}

}  // namespace

void attend_merge(int head_dim, float ms, float ls, const float* as, float* m, float* l,
                  float* acc) {
  if (ms == -std::numeric_limits<float>::infinity()) return;
  if (*m == -std::numeric_limits<float>::infinity()) {
    *m = ms;
    *l = ls;
    std::copy_n(as, head_dim, acc);
    return;
  }
  const float mn = std::max(*m, ms);
  const float cr = std::exp(*m - mn), cs = std::exp(ms - mn);
  *l = *l * cr + ls * cs;
  for (int j = 0; j < head_dim; ++j) acc[j] = acc[j] * cr + as[j] * cs;
  *m = mn;
}

const AttendKernels& scalar_attend_kernels() {
  static const AttendKernels k{
      "scalar",
      {attend_block_ref<KvType::F16>, attend_block_ref<KvType::Int8>,
       attend_block_ref<KvType::Int8Fp8>, attend_block_ref<KvType::Int4Fp8>}};
  return k;
}

#ifdef TERN_KV_HAVE_AVX2
const AttendKernels* avx2_attend_table();  // kv_attend_avx2.cpp
#endif
#ifdef TERN_KV_HAVE_AVX512
const AttendKernels* avx512_attend_table(const AttendKernels& avx2);  // kv_attend_avx512.cpp
#endif
#ifdef TERN_KV_HAVE_NEON
// kv_attend_neon.cpp: the table for a NEON-family ISA (the caller checked the
// CPU runs it), null when none is built for it.
const AttendKernels* neon_attend_table(kernels::Isa isa);
#endif

const AttendKernels* attend_kernels_for(kernels::Isa isa) {
  using kernels::Isa;
  if (isa == Isa::Scalar) return &scalar_attend_kernels();
  // Only for an ISA kernels' dispatch says this build and CPU can run.
  if (!kernels::isa_available(isa)) return nullptr;
  switch (isa) {
    case Isa::Avx2:
    case Isa::AvxVnni:
    case Isa::Avx512Vnni: {
      const AttendKernels* avx2 = nullptr;
#ifdef TERN_KV_HAVE_AVX2
      avx2 = avx2_attend_table();
#endif
#ifdef TERN_KV_HAVE_AVX512
      // VBMI: the value codes' bf16 table look-up (vpermi2b); BF16: the value products.
      const CpuFeatures& cpu = cpu_features();
      if (isa == Isa::Avx512Vnni && avx2 && cpu.avx512vl && cpu.avx512bf16 &&
          __builtin_cpu_supports("avx512vbmi"))
        return avx512_attend_table(*avx2);
#endif
      return avx2;
    }
    case Isa::Neon:
    case Isa::NeonDotprod:
    case Isa::NeonI8mm:
#ifdef TERN_KV_HAVE_NEON
      return neon_attend_table(isa);
#else
      return nullptr;
#endif
    case Isa::Scalar:
      break;
  }
  return nullptr;
}

std::vector<const AttendKernels*> available_attend_kernels() {
  std::vector<const AttendKernels*> v;
  for (kernels::Isa isa : kernels::available_isas()) {
    const AttendKernels* k = attend_kernels_for(isa);
    if (k && std::find(v.begin(), v.end(), k) == v.end()) v.push_back(k);
  }
  return v;
}

// Follows kernels' single dispatch point: TERN_KERNELS=scalar (or a CPU with
// no SIMD table) gives scalar attention too; an ISA without attention kernels
// of its own falls back to scalar.
const AttendKernels& active_attend_kernels() {
  static const AttendKernels& table = []() -> const AttendKernels& {
    const AttendKernels* pick = attend_kernels_for(kernels::active_isa());
    if (!pick) pick = &scalar_attend_kernels();
    log::get("kv")->debug("using {} KV attention kernels", pick->isa);
    return *pick;
  }();
  return table;
}

}  // namespace tern::kv
