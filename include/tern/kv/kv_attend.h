#pragma once
// Attention kernels that read KV blocks in place (no gather-copy).
//
// A kernel streams the first n_tok tokens of one block of one kv head into
// the online-softmax state (m, l, acc) of one query row:
//   for each token t:  s_t = q . k_t            (q pre-scaled by 1/sqrt(head_dim))
//   m' = max(m, s_t...), acc = acc * e^(m - m') + sum_t e^(s_t - m') v_t,
//   l = l * e^(m - m') + sum_t e^(s_t - m')
// and attend_finish() turns the state into out = acc / l. Start a row with
// m = -inf, l = 0, acc = 0. Softmax is always fp32.
//
// The scalar kernels are the oracle: the F16 one performs exactly the
// operations of kernels::attention_f16's reference, token by token, so a
// paged f16 cache gives bit-identical results to the contiguous one. The AVX2
// kernels update the state once per block (scores, block max, one rescale).
#include <cmath>
#include <limits>
#include <vector>

#include "tern/kernels/ops.h"
#include "tern/kv/kv_layout.h"

namespace tern::kv {

// q (head_dim), acc (head_dim), hb: one head of one layer slice of a block.
using AttendBlockFn = void (*)(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* q,
                               float* m, float* l, float* acc);

// The same for nr query rows that attend the same n_tok tokens (the query
// heads of one GQA group, for one token): row r's query is q[r] and its state
// m[r], l[r], acc + r*head_dim. Each key and value row is decoded once for all
// of them. Results are bit-identical to calling the one-row kernel per row.
using AttendRowsFn = void (*)(const KvLayout& L, const HeadBlock& hb, int n_tok, int nr,
                              const float* const* q, float* m, float* l, float* acc);

// A tile: nr query rows against one block, row r seeing its first n_tok[r]
// tokens (0: the row is left alone), e.g. the rows of several consecutive
// prompt tokens under the causal mask. The block's keys and values are
// decoded once for all rows; each row's result is bit-identical to running it
// alone (nr = 1), so batching, chunking and decode-vs-prefill never change a
// sequence's numbers. At most kMaxTileRows rows per call.
using AttendTileFn = void (*)(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok,
                              const float* const* q, float* m, float* l, float* acc);
inline constexpr int kMaxTileRows = 64;

// A span: the same rows against n_blocks consecutive blocks of one kv head
// (hbs[i], each whole: block_tokens tokens, head areas as head_block() gives
// them), row r seeing the span's first ctx[r] tokens (blocks past every
// row's context are not read). Bit-identical to calling the tile kernel
// block by block with each row's count in that block; what it saves is the
// per-row work a tile call repeats (the query's integer codes) and it reads
// the next block's head into L2 while one is in hand.
using AttendSpanFn = void (*)(const KvLayout& L, const HeadBlock* hbs, int n_blocks, int nr,
                              const int* ctx, const float* const* q, float* m, float* l,
                              float* acc);

struct AttendKernels {
  const char* isa;
  AttendBlockFn block[kNumKvTypes];     // indexed by KvType
  AttendRowsFn rows[kNumKvTypes] = {};  // optional (null: one row at a time)
  AttendTileFn tile[kNumKvTypes] = {};  // optional (null: rows / one row at a time)
  AttendSpanFn span[kNumKvTypes] = {};  // optional (null: the tile, block by block)
  AttendBlockFn for_type(KvType t) const { return block[int(t)]; }
  AttendRowsFn rows_for_type(KvType t) const { return rows[int(t)]; }
  AttendTileFn tile_for_type(KvType t) const { return tile[int(t)]; }
  AttendSpanFn span_for_type(KvType t) const { return span[int(t)]; }
};

const AttendKernels& scalar_attend_kernels();
// The attention table that goes with an instruction set of kernels' dispatch:
// the AVX2 one for avx2 and avxvnni, the AVX-512 one for avx512vnni when the
// CPU also has BF16 and VBMI (else AVX2), the NEON ones for the neon family.
// Null when this build or CPU cannot run that ISA or has no table for it.
const AttendKernels* attend_kernels_for(kernels::Isa isa);
// Every distinct table this build and CPU can run, scalar first (for tests and
// benchmarks that compare each with the scalar oracle).
std::vector<const AttendKernels*> available_attend_kernels();
// Chosen once: attend_kernels_for(kernels::active_isa()), scalar if null.
const AttendKernels& active_attend_kernels();

// The rescale of a row's state when its running max goes from m to m_new
// (>= m): e^(m - m_new), libm's expf, and exactly 1 without a call when the
// max held (expf(0) is 1): deep in a context the max rarely moves, and a call
// per row and block was a tenth of a 64-row tile on AVX2.
inline float attend_rescale(float m, float m_new) {
  return m == m_new && m != -std::numeric_limits<float>::infinity() ? 1.0f : std::exp(m - m_new);
}

inline void attend_start(int head_dim, float* m, float* l, float* acc) {
  *m = -std::numeric_limits<float>::infinity();
  *l = 0.0f;
  for (int j = 0; j < head_dim; ++j) acc[j] = 0.0f;
}

// Folds the state of a later stretch of the context (ms, ls, as) into a
// running state (m, l, acc): the split-K merge. An empty stretch (ms = -inf)
// changes nothing; merging into an empty state copies. One definition, so
// every caller merges with the same floating-point operations.
void attend_merge(int head_dim, float ms, float ls, const float* as, float* m, float* l,
                  float* acc);

// out (head_dim) = acc / l (zeros when nothing was attended).
inline void attend_finish(int head_dim, float l, const float* acc, float* out) {
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int j = 0; j < head_dim; ++j) out[j] = acc[j] * inv;
}

}  // namespace tern::kv
