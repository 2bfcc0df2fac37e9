#include "tern/vision/audio_mel.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "tern/core/error.h"
#include "tern/core/task_pool.h"

namespace tern::vision {
namespace {

using cd = std::complex<double>;

// The least power a mel bin takes before the log (2^-24, llama.cpp's mel floor).
constexpr double kPowerFloor = 5.960464477539063e-08;

// Slaney's mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic
// above (27 mels per factor 6.4).
double hz_to_mel(double hz) {
  constexpr double kLinear = 3.0 / 200.0;
  if (hz < 1000.0) return hz * kLinear;
  return 1000.0 * kLinear + std::log(hz / 1000.0) / (std::log(6.4) / 27.0);
}

double mel_to_hz(double mel) {
  constexpr double kLinear = 3.0 / 200.0;
  if (mel < 1000.0 * kLinear) return mel / kLinear;
  return 1000.0 * std::exp((mel - 1000.0 * kLinear) * (std::log(6.4) / 27.0));
}

// The DFT of n real values x[0], x[stride], ... into out[0..n): split in
// even and odd halves while n is even, a direct sum once it is odd.
// tw[k] = exp(-2 pi i k / N) for the top-level N; this level uses every
// (N / n)-th.
void fft(const double* x, int n, int stride, const std::vector<cd>& tw, int tw_step, cd* out,
         cd* scratch) {
  if (n % 2 == 1) {
    for (int k = 0; k < n; ++k) {
      cd sum = 0;
      int kj = 0;  // k j mod n, stepped instead of divided (the division cost most of the mel)
      for (int j = 0; j < n; ++j) {
        sum += x[size_t(j) * size_t(stride)] * tw[size_t(kj) * size_t(tw_step)];
        kj += k;
        if (kj >= n) kj -= n;
      }
      out[k] = sum;
    }
    return;
  }
  const int h = n / 2;
  fft(x, h, stride * 2, tw, tw_step * 2, scratch, out);
  fft(x + stride, h, stride * 2, tw, tw_step * 2, scratch + h, out);
  for (int k = 0; k < h; ++k) {
    const cd e = scratch[k];
    const cd o = scratch[h + k] * tw[size_t(k * tw_step)];
    out[k] = e + o;
    out[k + h] = e - o;
  }
}

}  // namespace

std::vector<float> mel_filter_bank(const MelConfig& c) {
  const int bins = c.n_fft / 2 + 1;
  const double lo = hz_to_mel(0.0), hi = hz_to_mel(0.5 * c.sample_rate);
  std::vector<double> edge(size_t(c.n_mel) + 2);
  for (size_t i = 0; i < edge.size(); ++i)
    edge[i] = mel_to_hz(lo + (hi - lo) * double(i) / double(c.n_mel + 1));
  std::vector<float> f(size_t(c.n_mel) * size_t(bins), 0.0f);
  const double bin_hz = double(c.sample_rate) / double(c.n_fft);
  for (int m = 0; m < c.n_mel; ++m) {
    const double left = edge[size_t(m)], mid = edge[size_t(m) + 1], right = edge[size_t(m) + 2];
    const double area = 2.0 / std::max(1e-30, right - left);  // Slaney: equal area per filter
    for (int k = 0; k < bins; ++k) {
      const double hz = k * bin_hz;
      double w = 0;
      if (hz >= left && hz <= mid)
        w = (hz - left) / std::max(1e-30, mid - left);
      else if (hz > mid && hz <= right)
        w = (right - hz) / std::max(1e-30, right - mid);
      f[size_t(m) * size_t(bins) + size_t(k)] = float(w * area);
    }
  }
  return f;
}

std::vector<MelChunk> whisper_log_mel(std::span<const float> samples, const MelConfig& c,
                                      TaskPool* pool) {
  if (samples.empty()) throw InvalidArgument("audio: the clip has no samples");
  if (c.n_mel < 1 || c.n_fft < 2 || c.hop < 1 || c.sample_rate < 1)
    throw InvalidArgument("audio: bad mel settings");
  const int half = c.n_fft / 2;
  const int bins = half + 1;
  // The padded signal: the start reflected, the clip (at least half + 1
  // samples), then 30 s + half of zeros.
  const size_t n = std::max(samples.size(), size_t(half) + 1);
  std::vector<double> x(size_t(half) + n + size_t(c.sample_rate) * 30 + size_t(half), 0.0);
  for (size_t i = 0; i < samples.size(); ++i) x[size_t(half) + i] = samples[i];
  for (int i = 0; i < half; ++i) x[size_t(half - 1 - i)] = x[size_t(half) + 1 + size_t(i)];
  const int64_t frames = int64_t(x.size() - size_t(c.n_fft)) / c.hop + 1;
  const int64_t n_chunks = frames / kMelChunkFrames;

  std::vector<double> window(size_t(c.n_fft));
  for (int i = 0; i < c.n_fft; ++i)
    window[size_t(i)] = 0.5 * (1.0 - std::cos(2.0 * std::numbers::pi * i / c.n_fft));
  std::vector<cd> tw(size_t(c.n_fft));
  for (int k = 0; k < c.n_fft; ++k)
    tw[size_t(k)] = std::polar(1.0, -2.0 * std::numbers::pi * k / c.n_fft);
  const std::vector<float> bank = mel_filter_bank(c);
  // Each filter's nonzero bins [lo, hi): a triangle covers a few bins, and
  // skipping exact zeros leaves every sum as it was.
  std::vector<int> bank_lo(size_t(c.n_mel), 0), bank_hi(size_t(c.n_mel), 0);
  for (int m = 0; m < c.n_mel; ++m) {
    const float* w = bank.data() + size_t(m) * size_t(bins);
    int lo = 0, hi = bins;
    while (lo < hi && w[lo] == 0.0f) ++lo;
    while (hi > lo && w[hi - 1] == 0.0f) --hi;
    bank_lo[size_t(m)] = lo;
    bank_hi[size_t(m)] = hi;
  }

  const int64_t used = n_chunks * kMelChunkFrames;
  std::vector<float> logmel(size_t(c.n_mel) * size_t(used));
  const size_t nf = size_t(c.n_fft), nb = size_t(bins), nm = size_t(c.n_mel);
  // Per worker: frame t's log10 mel powers into col.
  struct Scratch {
    std::vector<double> frame, power, col;
    std::vector<cd> spec, scratch;
  };
  const auto log_mel_frame = [&](int64_t t, Scratch& w) {
    const double* s = x.data() + size_t(t) * size_t(c.hop);
    for (int i = 0; i < c.n_fft; ++i) w.frame[size_t(i)] = s[i] * window[size_t(i)];
    fft(w.frame.data(), c.n_fft, 1, tw, 1, w.spec.data(), w.scratch.data());
    for (int k = 0; k < bins; ++k) w.power[size_t(k)] = std::norm(w.spec[size_t(k)]);
    for (int m = 0; m < c.n_mel; ++m) {
      const float* f = bank.data() + size_t(m) * size_t(bins);
      double sum = 0;
      for (int k = bank_lo[size_t(m)]; k < bank_hi[size_t(m)]; ++k)
        sum += w.power[size_t(k)] * double(f[k]);
      w.col[size_t(m)] = std::log10(std::max(sum, kPowerFloor));
    }
  };
  const auto new_scratch = [&] {
    return Scratch{std::vector<double>(nf), std::vector<double>(nb), std::vector<double>(nm),
                   std::vector<cd>(nf), std::vector<cd>(nf)};
  };
  // Frames are independent and the maximum does not depend on the order, so
  // the result is the same on any number of workers.
  constexpr int64_t kFramesPerTask = 64;
  const int64_t n_tasks = (used + kFramesPerTask - 1) / kFramesPerTask;
  std::vector<double> task_top(size_t(n_tasks), -1e300);
  const auto run_tasks = [&](int64_t b, int64_t e) {
    Scratch w = new_scratch();
    for (int64_t task = b; task < e; ++task)
      for (int64_t t = task * kFramesPerTask; t < std::min(used, (task + 1) * kFramesPerTask);
           ++t) {
        log_mel_frame(t, w);
        for (int m = 0; m < c.n_mel; ++m) {
          logmel[size_t(m) * size_t(used) + size_t(t)] = float(w.col[size_t(m)]);
          task_top[size_t(task)] = std::max(task_top[size_t(task)], w.col[size_t(m)]);
        }
      }
  };
  if (pool)
    pool->parallel_for(n_tasks, 1, [&](int64_t b, int64_t e, int) { run_tasks(b, e); });
  else
    run_tasks(0, n_tasks);
  double top = -1e300;
  for (double v : task_top) top = std::max(top, v);
  // The maximum is the whole spectrogram's, the dropped tail's frames
  // included (as llama.cpp takes it). The tail is padding: silent frames
  // sit at the floor, and only those still reaching into the clip are computed.
  Scratch w = new_scratch();
  for (int64_t t = used; t < frames; ++t) {
    const double* s = x.data() + size_t(t) * size_t(c.hop);
    if (std::all_of(s, s + c.n_fft, [](double v) { return v == 0.0; })) {
      top = std::max(top, std::log10(kPowerFloor));
      continue;
    }
    log_mel_frame(t, w);
    for (double v : w.col) top = std::max(top, v);
  }
  const double floor = top - 8.0;
  std::vector<MelChunk> out(static_cast<size_t>(n_chunks));
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    MelChunk& mc = out[size_t(ch)];
    mc.n_mel = c.n_mel;
    mc.n_frames = kMelChunkFrames;
    mc.data.resize(size_t(c.n_mel) * kMelChunkFrames);
    for (int m = 0; m < c.n_mel; ++m)
      for (int t = 0; t < kMelChunkFrames; ++t) {
        const double v =
            logmel[size_t(m) * size_t(used) + size_t(ch) * kMelChunkFrames + size_t(t)];
        mc.data[size_t(m) * kMelChunkFrames + size_t(t)] = float((std::max(v, floor) + 4.0) / 4.0);
      }
  }
  return out;
}

}  // namespace tern::vision
