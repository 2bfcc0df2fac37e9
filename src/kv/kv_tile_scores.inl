// The score half of an AVX2 tile row (included inside kv_attend_avx2.cpp's
// anonymous namespace). The AVX-512 kernel scores from a grouped key layout
// instead (kv_grouped_scores.inl); the same layout on AVX2 (2 keys x 4 dims
// per register) was measured 10% slower for decode tiles (3 rows), whose
// key staging then needs two 128-bit stores per 8 dims.

// Eight vectors -> one vector of their horizontal sums, in a fixed order.
inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The largest of a vector's 8 floats.
inline float hsum_max(__m256 v) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// Scores sv of keys k0..k0+7: those at or past n (the causal edge) become
// -inf; stored at s + k0 and folded into the running max mx.
inline void store_scores(__m256 sv, int k0, int n, float* s, __m256& mx) {
  if (k0 + 8 > n) {
    const __m256 keep = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n - k0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    sv = _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()), sv, keep);
  }
  mx = _mm256_max_ps(mx, sv);
  _mm256_storeu_ps(s + k0, sv);
}

// s[0, n8) = the row's scores against fp32 key rows kf (hd8 dims each, 8 keys
// at a time, one reduction per 8), times kscale[t] when given; keys at or
// past n (the causal edge) score -inf. Returns the row's block max.
inline float tile_scores(const float* qp, const float* kf, const float* kscale, int hd8, int n,
                         float* s) {
  const float inf = std::numeric_limits<float>::infinity();
  const int np = (n + 7) & ~7;
  __m256 mx = _mm256_set1_ps(-inf);
  for (int k0 = 0; k0 < np; k0 += 8) {
    __m256 a[8];
    for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
    const float* kr = kf + size_t(k0) * size_t(hd8);
    for (int j = 0; j < hd8; j += 8) {
      const __m256 qv = _mm256_loadu_ps(qp + j);
      for (int i = 0; i < 8; ++i)
        a[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + size_t(i) * size_t(hd8) + j), a[i]);
    }
    __m256 sv = reduce8(a);
    if (kscale) sv = _mm256_mul_ps(sv, _mm256_loadu_ps(kscale + k0));
    store_scores(sv, k0, n, s, mx);
  }
  return hsum_max(mx);
}

// Integer keys' scores: above this head size the int32 sums could overflow.
inline constexpr int kMaxIntScoreDims = 256;

// One row at a time (decode tiles, a few rows: no transposed copy to make):
// s[0, n8) = qscale * kscale[t] * (qi . ki[t]) for int16 query codes qi and
// int16 key rows ki (hd16 dims each, 8 keys at a time, exact int32 sums, one
// reduction per 8); keys at or past n score -inf. Returns the block max.
inline float tile_scores_i16(const int16_t* qi, float qscale, const int16_t* ki,
                             const float* kscale, int hd16, int n, float* s) {
  const float inf = std::numeric_limits<float>::infinity();
  const int np = (n + 7) & ~7;
  const __m256 qs = _mm256_set1_ps(qscale);
  __m256 mx = _mm256_set1_ps(-inf);
  for (int k0 = 0; k0 < np; k0 += 8) {
    __m256i a[8];
    for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_si256();
    const int16_t* kr = ki + size_t(k0) * size_t(hd16);
    for (int j = 0; j < hd16; j += 16) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qi + j));
      for (int i = 0; i < 8; ++i)
        a[i] = _mm256_add_epi32(
            a[i], _mm256_madd_epi16(qv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                            kr + size_t(i) * size_t(hd16) + j))));
    }
    const __m256i t0 = _mm256_hadd_epi32(a[0], a[1]), t1 = _mm256_hadd_epi32(a[2], a[3]);
    const __m256i t2 = _mm256_hadd_epi32(a[4], a[5]), t3 = _mm256_hadd_epi32(a[6], a[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                         _mm256_permute2x128_si256(u0, u1, 0x31));
    const __m256 sv =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum), qs), _mm256_loadu_ps(kscale + k0));
    store_scores(sv, k0, n, s, mx);
  }
  return hsum_max(mx);
}

// Integer scores as a small GEMM. The keys' int16 codes are transposed
// once per block into dim pairs: kp[p * n8 + t] is key t's dims 2p and
// 2p + 1 as one int32, so a query's pair broadcast against a register of 8
// keys gives 8 keys' partial sums by vpmaddwd, with no horizontal adds; two
// rows share every key load. The int32 sums are exact, so the scores are
// the same bits as any other order of the products (the one-row loop this
// replaced, the scalar oracle's integer twin).
inline void transpose_keys_i16(const int16_t* ki, int hd16, int n8, int32_t* kp) {
  const int P = hd16 / 2;
  for (int t0 = 0; t0 < n8; t0 += 8)
    for (int p0 = 0; p0 < P; p0 += 8) {
      __m256i r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(ki + size_t(t0 + i) * size_t(hd16) + 2 * p0));
      __m256i t[8], u[8];
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
      }
      // Pairs p0 + j (j < 8, while inside the row) for keys t0..t0 + 7.
      for (int j = 0; j < 4 && p0 + j < P; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(kp + size_t(p0 + j) * size_t(n8) + t0),
                            _mm256_permute2x128_si256(u[j], u[4 + j], 0x20));
      for (int j = 0; j < 4 && p0 + 4 + j < P; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(kp + size_t(p0 + 4 + j) * size_t(n8) + t0),
                            _mm256_permute2x128_si256(u[j], u[4 + j], 0x31));
    }
}

// R (1 or 2) rows' int32 sums against G groups of 8 keys from key k0, over
// P pairs (qp[r]: the row's int16 codes read as int32 pairs). Written with a
// flat accumulator array and the product first in each add: GCC 12 then keeps
// the accumulators in place (with acc[r][g] += ... it moved every one to a
// new register on every pair).
template <int R, int G>
inline void pair_sums(const int32_t* const* qp, const int32_t* kp, int n8, int P, int k0,
                      __m256i (&acc)[R][G]) {
  static_assert(R == 1 || R == 2);
  __m256i a[R * G];
  for (int i = 0; i < R * G; ++i) a[i] = _mm256_setzero_si256();
  const int32_t* q0 = qp[0];
  const int32_t* q1 = qp[R - 1];
  const int32_t* k = kp + k0;
  for (int p = 0; p < P; ++p, k += n8) {
    const __m256i qb0 = _mm256_set1_epi32(q0[p]);
    const __m256i qb1 = _mm256_set1_epi32(q1[p]);
    for (int g = 0; g < G; ++g) {
      const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 8 * g));
      a[g] = _mm256_add_epi32(_mm256_madd_epi16(qb0, kv), a[g]);
      if constexpr (R == 2) a[G + g] = _mm256_add_epi32(_mm256_madd_epi16(qb1, kv), a[G + g]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = a[r * G + g];
}

// Scores of R rows against keys [0, n8) (rows' own counts n[r]; keys at or
// past them score -inf): s[r][t] = qs[r] * kscale[t] * (q_r . k_t), 32 keys
// a pass. Returns each row's block max in mx[r].
template <int R>
inline void rows_scores_i16(const int32_t* const* qp, const float* qs, const int32_t* kp,
                            const float* kscale, int P, int n8, const int* n, float* const* s,
                            float* mx) {
  const float inf = std::numeric_limits<float>::infinity();
  __m256 m[R];
  for (int r = 0; r < R; ++r) m[r] = _mm256_set1_ps(-inf);
  int n_hi = 0;
  for (int r = 0; r < R; ++r) n_hi = std::max(n_hi, (n[r] + 7) & ~7);
  auto finish = [&](int r, int k0, __m256i sum) {
    const __m256 sv = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(qs[r])),
                                    _mm256_loadu_ps(kscale + k0));
    store_scores(sv, k0, n[r], s[r], m[r]);
  };
  for (int k0 = 0; k0 < n_hi; k0 += 32) {
    const int groups = std::min(4, (n_hi - k0) / 8);
    auto run = [&]<int G>() {
      __m256i acc[R][G];
      pair_sums<R, G>(qp, kp, n8, P, k0, acc);
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g) finish(r, k0 + 8 * g, acc[r][g]);
    };
    switch (groups) {
      case 4:
        run.template operator()<4>();
        break;
      case 3:
        run.template operator()<3>();
        break;
      case 2:
        run.template operator()<2>();
        break;
      default:
        run.template operator()<1>();
        break;
    }
  }
  for (int r = 0; r < R; ++r) mx[r] = hsum_max(m[r]);
}
