// The AVX-512 attention kernel's score loop (included inside its anonymous
// namespace after it defines its vector ops V; written over V so another
// ISA's file can include it with its own flags). V provides: T (the
// register type), kLanes (floats per register), zero(), load(p),
// bcast4(p) (4 floats repeated over every 128-bit lane), fma(a, b, c),
// add(a, b) and shuffle<imm>(a, b) (shufps within 128-bit lanes).
//
// Keys are staged in super-groups of kLanes keys; within one, group i (0..3)
// holds keys i, i + 4, ... (one per 128-bit lane), and register (sg, j, i)
// holds those keys' dims 4j..4j+3. A row's FMA against it leaves each key's 4
// partial sums in its own lane, and two shuffle levels over the 4 groups give
// kLanes scores in token order: no horizontal adds.

// Four groups' lane sums -> kLanes scores in token order.
template <class V>
inline typename V::T reduce_groups(const typename V::T* a) {
  const typename V::T d01 =
      V::add(V::template shuffle<0x44>(a[0], a[1]), V::template shuffle<0xee>(a[0], a[1]));
  const typename V::T d23 =
      V::add(V::template shuffle<0x44>(a[2], a[3]), V::template shuffle<0xee>(a[2], a[3]));
  return V::add(V::template shuffle<0x88>(d01, d23), V::template shuffle<0xdd>(d01, d23));
}

// Scores of SG consecutive super-groups (kLanes * SG keys) for one row (q:
// 4 * J floats, zero-padded); each key's sum runs in the same order whatever
// SG is, so a row's scores never depend on how many keys were scored with it.
template <class V, int SG>
inline void score_groups(const float* q, const float* kf, int J, typename V::T* out) {
  typename V::T a[SG][4];
  for (int g = 0; g < SG; ++g)
    for (int i = 0; i < 4; ++i) a[g][i] = V::zero();
  for (int j = 0; j < J; ++j) {
    const typename V::T qv = V::bcast4(q + 4 * j);
    for (int g = 0; g < SG; ++g) {
      const float* k = kf + (size_t(g) * size_t(J) + size_t(j)) * 4 * V::kLanes;
      for (int i = 0; i < 4; ++i) a[g][i] = V::fma(qv, V::load(k + V::kLanes * i), a[g][i]);
    }
  }
  for (int g = 0; g < SG; ++g) out[g] = reduce_groups<V>(a[g]);
}

// A row's scores against keys [0, n) (rounded up to whole registers), two
// super-groups per pass where they exist; finish(t0, scores) gets each
// register of kLanes scores, keys t0.. in order.
template <class V, class Finish>
inline void score_row(const float* q, const float* kf, int J, int n, Finish&& finish) {
  constexpr int W = V::kLanes;
  const int np = (n + W - 1) / W * W;
  int t0 = 0;
  for (; t0 + 2 * W <= np; t0 += 2 * W) {
    typename V::T sv[2];
    score_groups<V, 2>(q, kf + size_t(t0) * size_t(4 * J), J, sv);
    finish(t0, sv[0]);
    finish(t0 + W, sv[1]);
  }
  if (t0 < np) {
    typename V::T sv[1];
    score_groups<V, 1>(q, kf + size_t(t0) * size_t(4 * J), J, sv);
    finish(t0, sv[0]);
  }
}
