// The fast audio encoder: Whisper's convolutions as im2col GEMMs and its
// blocks on the shared int8 pieces (vit_ops.h), fp32 norms, softmax and
// GELU; the projector heads after. Resumable like the image encoder.
//
// GELU: the reference (and llama.cpp) use the erf form; this path uses the
// tanh form of kernels::geglu, which vectorizes. The two differ by < 5e-4
// per value, far below the int8 quantization of the next product's input.
#include "tern/vision/audio_encoder.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "staged_job.h"
#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "vit_common.h"
#include "vit_ops.h"

namespace tern::vision {
namespace {

using detail::Block;
using detail::Floats;
using detail::Linear;
using detail::Norm;

// cols (n, 3 C) = the im2col rows of output times [t0, t0 + n) of a conv
// with kernel 3, padding 1, stride s over in(c, t) (L times): row t holds,
// for each channel c, in(c, t s - 1 + k) for k = 0..2 (zeros outside) -- the
// order of a GGUF conv kernel [3, C, C_out].
template <class In>
void im2col(In in, int C, int L, int stride, int t0, int n, float* cols, TaskPool& pool) {
  pool.parallel_for(n, 16, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      float* row = cols + size_t(r) * 3 * C;
      const int base = int(t0 + r) * stride - 1;
      for (int c = 0; c < C; ++c)
        for (int k = 0; k < 3; ++k) {
          const int t = base + k;
          row[c * 3 + k] = t >= 0 && t < L ? in(c, t) : 0.0f;
        }
    }
  });
}

}  // namespace

struct AudioEncoder::Impl {
  AudioMmproj mm;
  AudioConfig c;
  Linear conv1, conv2;  // (D, 3 n_mel), (D, 3 D)
  Floats pos;           // (P, D)
  std::vector<Block> layers;
  Norm post_ln;               // empty when the file has none
  Linear p1, p2;              // ultravox, voxtral: mm.a.mlp.1 / .2; qwen2a: p1 = mm.a.fc
  Floats norm_pre, norm_mid;  // ultravox
  Floats ones;                // GELU runs as geglu(x, 1)
  std::string begin, end;

  explicit Impl(AudioMmproj m) : mm(std::move(m)), c(mm.config()) {
    // The blocks quantize (T, D) rows in place: D must fill whole groups
    // (every Whisper size does: 384 .. 1280).
    if (c.d_model % kernels::kGroup != 0)
      throw InvalidArgument("audio encoder: embedding width " + std::to_string(c.d_model) +
                            " is not a multiple of " + std::to_string(kernels::kGroup));
    const AudioWeights& w = mm.weights();
    conv1 = detail::make_linear(w.conv1_w, w.conv1_b);
    conv2 = detail::make_linear(w.conv2_w, w.conv2_b);
    pos = detail::to_floats(w.pos_embd);
    pos.resize(size_t(c.n_positions()) * c.d_model);
    for (const VisionLayerWeights& L : w.layers) layers.push_back(detail::make_block(L));
    if (c.has_post_ln) post_ln = detail::make_norm(w.post_ln_w, w.post_ln_b);
    if (c.projector == AudioProjector::Qwen2a) {
      p1 = detail::make_linear(w.fc_w, w.fc_b);
    } else {
      p1 = detail::make_linear(w.mlp1_w, nullptr);
      p2 = detail::make_linear(w.mlp2_w, nullptr);
    }
    if (c.projector == AudioProjector::Ultravox) {
      norm_pre = detail::to_floats(w.norm_pre_w);
      norm_mid = detail::to_floats(w.norm_mid_w);
    }
    ones.assign(size_t(std::max({c.d_ff, c.d_model, c.d_proj_hidden})), 1.0f);
    begin = audio_begin_text(c.projector);
    end = audio_end_text(c.projector);
  }

  // f (T, n) = GELU(f)
  void gelu(float* f, int T, int n, TaskPool& pool) const {
    pool.parallel_for(T, 16, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) kernels::geglu(f + t * n, ones.data(), f + t * n, n);
    });
  }

  // The projector head's input rows from x (T, D) after the post LN, in
  // place: stacked s rows into one of D s (zero-padded), and for ultravox
  // RMS-normed. Returns the number of rows (tokens).
  int stack_rows(Floats& x, int T) const;
  // Its output: st (n, W) rows -> out (n, d_out); row-local.
  void project_rows(const float* st, int n, float* out, TaskPool& pool) const;
  // GFLOP of one output row.
  double project_gflop_per_row() const {
    return 2e-9 * (double(p1.w.n_in) * p1.w.n_out +
                   (c.projector == AudioProjector::Qwen2a ? 0.0 : double(p2.w.n_in) * c.d_out));
  }
};

int AudioEncoder::Impl::stack_rows(Floats& x, int T) const {
  if (c.projector == AudioProjector::Qwen2a) return T;
  const int s = c.stack_factor, n = (T + s - 1) / s, W = c.d_model * s;
  x.resize(size_t(n) * W, 0.0f);
  std::fill(x.begin() + ptrdiff_t(T) * c.d_model, x.end(), 0.0f);
  if (c.projector == AudioProjector::Ultravox)
    for (int t = 0; t < n; ++t) detail::rms_norm(&x[size_t(t) * W], norm_pre.data(), W, 1e-6f);
  return n;
}

void AudioEncoder::Impl::project_rows(const float* st, int n, float* out, TaskPool& pool) const {
  if (c.projector == AudioProjector::Qwen2a) return detail::linear(p1, st, n, out, pool);
  Floats h(size_t(n) * p1.w.n_out);
  detail::linear(p1, st, n, h.data(), pool);
  if (c.projector == AudioProjector::Voxtral) {
    gelu(h.data(), n, p1.w.n_out, pool);
  } else {  // ultravox: SwiGLU with the second half gated, then RMSNorm
    const int H = c.d_proj_hidden;
    Floats g(size_t(n) * H);
    pool.parallel_for(n, 16, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) {
        const float* r = &h[size_t(t) * 2 * H];
        kernels::swiglu(r + H, r, &g[size_t(t) * H], H);
        detail::rms_norm(&g[size_t(t) * H], norm_mid.data(), H, 1e-6f);
      }
    });
    h.swap(g);
  }
  detail::linear(p2, h.data(), n, out, pool);
}

// The stages of one chunk, in order (F = 3000 mel frames, P = 1500
// positions, blocks of rb rows: nb1 of the frames, nb of the positions; H
// heads):
//   nb1 x conv1 + GELU, nb x {conv2 + GELU + positions},
//   per layer: nb x {LN1, Q K V}, H x attention head, nb x {O, +x, LN2, up, GELU, down, +x},
//   1 x {average pool, post LN, stacking}, np x projector on rbp token rows
//   (rbp chosen so one such stage costs about a row-wise block stage).
struct AudioEncodeJob::State {
  using Impl = AudioEncoder::Impl;
  const Impl& m;
  std::shared_ptr<const AudioClip> clip;  // to turn into mel chunks first
  std::vector<MelChunk> chunks;
  int rb1 = 0, rb = 0;  // rows per stage: frames, positions
  int nb1 = 0, nb = 0;
  int per_chunk = 0;
  int n_tok = 0, rbp = 0, np = 0;  // tokens per chunk, projector rows per stage, stages
  size_t out_at = 0;               // the current chunk's first value in out.data
  int n_chunks = 0;                // known after the mel step
  int next = 0;                    // stages done over all chunks
  Embeddings out;
  bool taken = false;
  Floats h1;                 // (F, D) conv1's output
  Floats cols;               // (rows, 3 max(n_mel, D)) im2col scratch
  Floats x, xn, q, k, v, a;  // (P, D)
  Floats f;                  // (rb, d_ff)
  detail::AttnScratch attn;
  detail::JobPacing pacing;

  State(const Impl& impl, std::shared_ptr<const AudioClip> c, std::vector<MelChunk> ch,
        int row_block)
      : m(impl), clip(std::move(c)), chunks(std::move(ch)), n_chunks(int(chunks.size())) {
    const int F = AudioConfig::kFrames, P = m.c.n_positions();
    rb1 = row_block <= 0 ? F : std::min(row_block, F);
    rb = row_block <= 0 ? P : std::min(row_block, P);
    nb1 = (F + rb1 - 1) / rb1;
    nb = (P + rb - 1) / rb;
    n_tok = m.c.tokens_per_chunk();
    const double block_gflop = 2e-9 * rb * m.c.d_model * (m.c.d_model + 2.0 * m.c.d_ff);
    rbp =
        row_block <= 0 ? n_tok : std::clamp(int(block_gflop / m.project_gflop_per_row()), 1, n_tok);
    np = (n_tok + rbp - 1) / rbp;
    per_chunk = nb1 + nb + int(m.layers.size()) * (2 * nb + m.c.n_heads) + 1 + np;
    out.n_embd = m.c.d_out;
  }
  bool preprocessing() const { return clip != nullptr; }
  int total() const { return n_chunks * per_chunk; }
  bool done() const { return !preprocessing() && next >= total(); }
  double gflop(int s) const;
  void run(int s, const MelChunk& mel, TaskPool& pool);
  // For detail::advance_stages:
  void preprocess(TaskPool& pool) {
    chunks = whisper_log_mel(clip->samples, m.c.mel(), &pool);
    n_chunks = int(chunks.size());
    clip.reset();
  }
  double next_gflop() const { return gflop(next % per_chunk); }
  void run_next(TaskPool& pool) {
    run(next % per_chunk, chunks[size_t(next / per_chunk)], pool);
    ++next;
  }
  void finish_chunk(TaskPool& pool);
};

double AudioEncodeJob::State::gflop(int s) const {
  const AudioConfig& c = m.c;
  const double D = c.d_model, Ff = c.d_ff, P = c.n_positions();
  if (s < nb1) return 2.0 * rb1 * 3 * c.n_mel * D * 1e-9;
  if (s < nb1 + nb) return 2.0 * rb * 3 * D * D * 1e-9;
  if (s >= per_chunk - np) return rbp * m.project_gflop_per_row();
  if (s == per_chunk - np - 1) return 0;
  const int r = (s - nb1 - nb) % (2 * nb + c.n_heads);
  if (r < nb) return 2.0 * rb * 3 * D * D * 1e-9;
  if (r < nb + c.n_heads) return 4.0 * P * P * c.head_dim() * 1e-9;
  return 2.0 * rb * (D * D + 2 * D * Ff) * 1e-9;
}

void AudioEncodeJob::State::run(int s, const MelChunk& mel, TaskPool& pool) {
  const AudioConfig& c = m.c;
  const int F = AudioConfig::kFrames, P = c.n_positions(), D = c.d_model;
  if (s == 0) {  // a new chunk
    h1.resize(size_t(F) * D);
    cols.resize(size_t(std::max(rb1, rb)) * 3 * std::max(c.n_mel, D));
    for (Floats* b : {&x, &xn, &q, &k, &v, &a}) b->resize(size_t(P) * D);
    f.resize(size_t(rb) * c.d_ff);
  }
  if (s < nb1) {  // h1 rows = GELU(conv1(mel))
    const int r0 = s * rb1, n = std::min(F, r0 + rb1) - r0;
    im2col([&](int ch, int t) { return mel.data[size_t(ch) * F + t]; }, c.n_mel, F, 1, r0, n,
           cols.data(), pool);
    detail::linear(m.conv1, cols.data(), n, &h1[size_t(r0) * D], pool);
    m.gelu(&h1[size_t(r0) * D], n, D, pool);
    return;
  }
  if (s < nb1 + nb) {  // x rows = GELU(conv2(h1)) + positions
    const int r0 = (s - nb1) * rb, n = std::min(P, r0 + rb) - r0;
    im2col([&](int ch, int t) { return h1[size_t(t) * D + ch]; }, D, F, 2, r0, n, cols.data(),
           pool);
    float* xr = &x[size_t(r0) * D];
    detail::linear(m.conv2, cols.data(), n, xr, pool);
    m.gelu(xr, n, D, pool);
    for (size_t i = 0; i < size_t(n) * D; ++i) xr[i] += m.pos[size_t(r0) * D + i];
    return;
  }
  if (s == per_chunk - np - 1) return finish_chunk(pool);
  if (s >= per_chunk - np) {  // projector rows [r0, r0 + n) of the chunk's tokens
    const int r0 = (s - (per_chunk - np)) * rbp, n = std::min(n_tok, r0 + rbp) - r0;
    const size_t W = x.size() / size_t(n_tok);
    m.project_rows(&x[size_t(r0) * W], n, &out.data[out_at + size_t(r0) * c.d_out], pool);
    return;
  }
  const int per_layer = 2 * nb + c.n_heads;
  const Block& L = m.layers[size_t((s - nb1 - nb) / per_layer)];
  const int r = (s - nb1 - nb) % per_layer;
  if (r < nb) {  // q, k, v = LN1(x)
    const size_t o = size_t(r) * rb * D;
    const int n = std::min(P, (r + 1) * rb) - r * rb;
    detail::layer_norm(L.ln1, c.ln_eps, &x[o], &xn[o], n, pool);
    detail::qkv(L, &xn[o], n, &q[o], &k[o], &v[o], pool);
  } else if (r < nb + c.n_heads) {  // a = attn(q, k, v), one head
    detail::attention_head(q.data(), k.data(), v.data(), a.data(), P, D, c.head_dim(), r - nb, attn,
                           pool);
  } else {  // x += o(a); x += down(GELU(up(LN2(x))))
    const int b = r - nb - c.n_heads, n = std::min(P, (b + 1) * rb) - b * rb;
    const size_t o = size_t(b) * rb * D;
    detail::block_out_rows(
        L, c.ln_eps, &a[o], &x[o], &xn[o], &q[o], f.data(), n, D,
        [&](float* rows, int n_rows) { m.gelu(rows, n_rows, c.d_ff, pool); }, pool);
  }
}

// Average pool (qwen2a, voxtral), post LN, stacking: x becomes the projector's
// input rows; out gets room for the chunk's rows.
void AudioEncodeJob::State::finish_chunk(TaskPool& pool) {
  const AudioConfig& c = m.c;
  const int D = c.d_model;
  int T = c.n_positions();
  if (c.projector != AudioProjector::Ultravox) {
    T /= 2;
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d)
        x[size_t(t) * D + d] = (x[size_t(2 * t) * D + d] + x[size_t(2 * t + 1) * D + d]) * 0.5f;
    x.resize(size_t(T) * D);
  }
  if (c.has_post_ln) detail::layer_norm(m.post_ln, c.ln_eps, x.data(), x.data(), T, pool);
  const int n = m.stack_rows(x, T);
  assert(n == n_tok);
  out_at = out.data.size();
  out.data.resize(out_at + size_t(n) * c.d_out);
  out.n_tokens += n;
}

AudioEncodeJob::AudioEncodeJob(std::unique_ptr<State> st) : st_(std::move(st)) {}
AudioEncodeJob::~AudioEncodeJob() = default;
AudioEncodeJob::AudioEncodeJob(AudioEncodeJob&&) noexcept = default;
AudioEncodeJob& AudioEncodeJob::operator=(AudioEncodeJob&&) noexcept = default;

bool AudioEncodeJob::advance(TaskPool& pool, double budget_ms) {
  State& st = *st_;
  detail::advance_stages(st, st.pacing, pool, budget_ms);
  if (st.done()) {  // the activations are no longer needed
    for (Floats* b : {&st.h1, &st.cols, &st.x, &st.xn, &st.q, &st.k, &st.v, &st.a, &st.f})
      Floats().swap(*b);
    std::vector<MelChunk>().swap(st.chunks);
  }
  return st.done();
}

bool AudioEncodeJob::done() const {
  return st_->done();
}
Embeddings AudioEncodeJob::take() {
  if (!done() || st_->taken)
    throw InvalidArgument("AudioEncodeJob::take: not done, or taken already");
  st_->taken = true;
  return std::move(st_->out);
}
int AudioEncodeJob::stages_total() const {
  return st_->total();
}
int AudioEncodeJob::stages_done() const {
  return st_->next;
}
int AudioEncodeJob::slices() const {
  return st_->pacing.slices;
}
double AudioEncodeJob::busy_ms() const {
  return st_->pacing.busy_ms;
}
double AudioEncodeJob::ms_per_gflop() const {
  return st_->pacing.ms_per_gflop;
}
void AudioEncodeJob::set_ms_per_gflop(double v) {
  st_->pacing.ms_per_gflop = v;
}

AudioEncoder::AudioEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AudioEncoder::~AudioEncoder() = default;
AudioEncoder::AudioEncoder(AudioEncoder&&) noexcept = default;
AudioEncoder& AudioEncoder::operator=(AudioEncoder&&) noexcept = default;

AudioEncoder AudioEncoder::load(const std::string& mmproj_path) {
  return from_mmproj(AudioMmproj::open(mmproj_path));
}
AudioEncoder AudioEncoder::from_mmproj(AudioMmproj mmproj) {
  return AudioEncoder(std::make_unique<Impl>(std::move(mmproj)));
}

const AudioConfig& AudioEncoder::config() const {
  return impl_->c;
}
const std::string& AudioEncoder::begin_text() const {
  return impl_->begin;
}
const std::string& AudioEncoder::end_text() const {
  return impl_->end;
}

// whisper_log_mel's count without computing it: the padded signal (the
// start reflected by n_fft/2, 30 s + n_fft/2 of zeros appended) gives
// 1 + (len - n_fft) / hop frames, cut into whole 3000-frame chunks.
int AudioEncoder::n_chunks(const AudioClip& clip) {
  const MelConfig mc;
  if (clip.samples.empty()) return 0;
  const int64_t n = std::max<int64_t>(int64_t(clip.samples.size()), mc.n_fft / 2 + 1);
  const int64_t padded = n + mc.n_fft / 2 + int64_t(30) * mc.sample_rate + mc.n_fft / 2;
  const int64_t frames = 1 + (padded - mc.n_fft) / mc.hop;
  return int(frames / AudioConfig::kFrames);
}

int AudioEncoder::n_output_tokens(const AudioClip& clip) const {
  return n_chunks(clip) * impl_->c.tokens_per_chunk();
}

static void check_clip(const AudioClip& clip) {
  if (clip.samples.empty()) throw InvalidArgument("audio encoder: the clip has no samples");
  if (clip.sample_rate != 16000)
    throw InvalidArgument("audio encoder: the clip is at " + std::to_string(clip.sample_rate) +
                          " Hz, not 16000");
}

Embeddings AudioEncoder::encode(const AudioClip& clip, TaskPool& pool) const {
  check_clip(clip);
  AudioEncodeJob job(std::make_unique<AudioEncodeJob::State>(
      *impl_, nullptr, whisper_log_mel(clip.samples, impl_->c.mel(), &pool), 0));
  job.advance(pool, std::numeric_limits<double>::infinity());
  return job.take();
}

Embeddings AudioEncoder::encode_chunk(const MelChunk& mel, TaskPool& pool) const {
  const AudioConfig& c = impl_->c;
  if (mel.n_mel != c.n_mel || mel.n_frames != AudioConfig::kFrames ||
      mel.data.size() != size_t(c.n_mel) * AudioConfig::kFrames)
    throw InvalidArgument("mel chunk is not (" + std::to_string(c.n_mel) + ", 3000)");
  AudioEncodeJob job(
      std::make_unique<AudioEncodeJob::State>(*impl_, nullptr, std::vector<MelChunk>{mel}, 0));
  job.advance(pool, std::numeric_limits<double>::infinity());
  return job.take();
}

AudioEncodeJob AudioEncoder::start_encode(std::shared_ptr<const AudioClip> clip,
                                          int row_block) const {
  if (!clip) throw InvalidArgument("start_encode: no clip");
  check_clip(*clip);
  return AudioEncodeJob(std::make_unique<AudioEncodeJob::State>(
      *impl_, std::move(clip), std::vector<MelChunk>{}, row_block));
}

}  // namespace tern::vision
