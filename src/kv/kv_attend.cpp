// Scalar block-attention kernels (the oracle), and the choice between them
// and the AVX2 ones, which follows kernels' single dispatch point.
#include "tern/kv/kv_attend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

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

const AttendKernels* avx2_attend_kernels() {
#ifdef TERN_KV_HAVE_AVX2
  if (kernels::cpu_runs_avx2()) return avx2_attend_table();
#endif
  return nullptr;
}

#ifdef TERN_KV_HAVE_AVX512
const AttendKernels* avx512_attend_table(const AttendKernels& avx2);  // kv_attend_avx512.cpp
#endif

const AttendKernels* avx512_attend_kernels() {
#ifdef TERN_KV_HAVE_AVX512
  const CpuFeatures& cpu = cpu_features();
  const AttendKernels* avx2 = avx2_attend_kernels();
  // VBMI: the value codes' bf16 table look-up (vpermi2b).
  if (avx2 && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512vnni && cpu.avx512bf16 &&
      __builtin_cpu_supports("avx512vbmi"))
    return avx512_attend_table(*avx2);
#endif
  return nullptr;
}

// The same family as the matmul and norm kernels: TERN_KERNELS=scalar (or a
// CPU without AVX2) gives scalar attention too.
const AttendKernels& active_attend_kernels() {
  static const AttendKernels& table = []() -> const AttendKernels& {
    const AttendKernels* pick = &scalar_attend_kernels();
    // TERN_KV_ATTENTION=avx2 keeps the fp32 AVX2 attention under AVX-512
    // matmuls (to measure what the AVX-512 attention changes).
    const char* force = std::getenv("TERN_KV_ATTENTION");
    const bool no_avx512 = force && std::string_view(force) == "avx2";
    if (kernels::active_isa_family() == kernels::IsaFamily::Avx2) {
      if (const AttendKernels* a = avx2_attend_kernels()) pick = a;
      if (kernels::active_isa_is_avx512() && !no_avx512) {
        if (const AttendKernels* a = avx512_attend_kernels()) pick = a;
      }
    }
    log::get("kv")->debug("using {} KV attention kernels", pick->isa);
    return *pick;
  }();
  return table;
}

}  // namespace tern::kv
