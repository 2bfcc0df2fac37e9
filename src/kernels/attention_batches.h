#pragma once
// The ISA-neutral half of the fast attention_f16 kernels (ops_avx2.cpp,
// ops_neon.cpp): a block's queries -- the n_grp heads of each of n_tok tokens,
// token i seeing n_kv0 + i keys -- handed to the ISA's kernel kMaxQueries at a
// time (whole tokens), so that each K/V chunk is converted once for all of
// them. No intrinsics: safe to include from files of any -m flags.
#include <algorithm>
#include <cstdint>

namespace tern::kernels {

// attend(qs, os, n_kv, n_q) for each batch: query r at qs[r], its output at
// os[r], seeing n_kv[r] keys. Needs n_grp <= kMaxQueries.
template <int kMaxQueries, class Attend>
inline void for_query_batches(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp,
                              int n_kv0, int head_dim, Attend&& attend) {
  const int tok_chunk = kMaxQueries / n_grp;
  for (int i0 = 0; i0 < n_tok; i0 += tok_chunk) {
    const float* qs[kMaxQueries];
    float* os[kMaxQueries];
    int n_kv[kMaxQueries];
    int n_q = 0;
    for (int i = i0; i < std::min(n_tok, i0 + tok_chunk); ++i) {
      for (int g = 0; g < n_grp; ++g, ++n_q) {
        qs[n_q] = q + i * q_stride + g * head_dim;
        os[n_q] = out + i * q_stride + g * head_dim;
        n_kv[n_q] = n_kv0 + i;
      }
    }
    attend(qs, os, n_kv, n_q);
  }
}

}  // namespace tern::kernels
