#include "step_budget.h"

#include <algorithm>
#include <cmath>

namespace tern::sched {
namespace {

constexpr double kEwma = 0.3;     // weight of the newest decode-only step
constexpr double kRidge = 0.001;  // of each coefficient's own curvature (scale-free)

void ewma(double& x, double v) {
  x = x > 0 ? x + kEwma * (v - x) : v;
}

}  // namespace

std::array<double, 3> StepBudget::features(int n, int depth) {
  const double dn = n, dd = depth;
  return {dn, dn * (dd + dn / 2) / 1024.0, dd / 1024.0};
}

void StepBudget::observe(int decodes, double ms, bool fit_it) {
  std::array<double, 3> x{};
  int tokens = 0, deepest = 0;
  for (const Chunk& c : step_) {
    deepest = std::max(deepest, c.depth);
    const auto f = features(c.n, c.depth);
    for (size_t j = 0; j < 3; ++j) x[j] += f[j];
    tokens += c.n;
  }
  step_.clear();
  if (decodes == 0) return;
  if (tokens == 0) {
    ewma(decode_ms_, ms);
    since_probe_ = 0;
    return;
  }
  since_probe_ += 1;
  if (!fit_it || decode_ms_ <= 0) return;
  double extra = std::max(ms - decode_ms_, 0.0);
  // A stall of the machine (another process on the cores) is not the
  // chunks' cost: once fitted, a step counts at most one decode-only step
  // over the prediction (a real change still gets through, a step at a time).
  if (fitted()) {
    double pred = 0;
    for (size_t j = 0; j < 3; ++j) pred += theta_[j] * x[j];
    extra = std::min(extra, pred + decode_ms_);
  }
  ewma(token_ms_, std::max(extra / tokens, 1e-3));  // > 0: known
  obs_[size_t(n_obs_ % kWindow)] = {x[0], x[1], x[2], extra};
  n_obs_ += 1;
  if (deepest < kShallowDepth)
    shallow_[size_t(n_shallow_++ % kShallow)] = {x[0], x[1], x[2], extra};
  fit();
}

// Non-negative least squares over the window, with a ridge of kRidge times
// each coefficient's own curvature (the same whatever the feature's units):
// every subset of coefficients is solved with the others at zero, and the
// best feasible one wins (3 coefficients: 7 subsets, each a 3x3 system).
void StepBudget::fit() {
  double g[3][3] = {}, r[3] = {};
  auto add = [&](const std::array<double, 4>& o) {
    for (int i = 0; i < 3; ++i) {
      r[i] += o[size_t(i)] * o[3];
      for (int j = 0; j < 3; ++j) g[i][j] += o[size_t(i)] * o[size_t(j)];
    }
  };
  for (int k = 0; k < std::min(n_obs_, kWindow); ++k) add(obs_[size_t(k)]);
  // Shallow steps still in the window count twice: harmless, they are few.
  for (int k = 0; k < std::min(n_shallow_, kShallow); ++k) add(shallow_[size_t(k)]);
  for (int i = 0; i < 3; ++i) g[i][i] = g[i][i] * (1 + kRidge) + 1e-9;
  // The objective up to a constant: t'Gt - 2 r't.
  auto objective = [&](const double* t) {
    double v = 0;
    for (int i = 0; i < 3; ++i) {
      v -= 2 * r[i] * t[i];
      for (int j = 0; j < 3; ++j) v += t[i] * g[i][j] * t[j];
    }
    return v;
  };
  double best[3] = {0, 0, 0};
  double best_v = 0;  // all zero
  for (int mask = 1; mask < 8; ++mask) {
    int idx[3], m = 0;
    for (int i = 0; i < 3; ++i)
      if (mask & (1 << i)) idx[m++] = i;
    // Solve G[idx][idx] t = r[idx] by Gaussian elimination (m <= 3).
    double a[3][4];
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < m; ++j) a[i][j] = g[idx[i]][idx[j]];
      a[i][m] = r[idx[i]];
    }
    bool ok = true;
    for (int c = 0; c < m && ok; ++c) {
      int piv = c;
      for (int i = c + 1; i < m; ++i)
        if (std::fabs(a[i][c]) > std::fabs(a[piv][c])) piv = i;
      if (std::fabs(a[piv][c]) < 1e-12) {
        ok = false;
        break;
      }
      for (int j = 0; j <= m; ++j) std::swap(a[c][j], a[piv][j]);
      for (int i = 0; i < m; ++i) {
        if (i == c) continue;
        const double f = a[i][c] / a[c][c];
        for (int j = c; j <= m; ++j) a[i][j] -= f * a[c][j];
      }
    }
    if (!ok) continue;
    double t[3] = {0, 0, 0};
    for (int i = 0; i < m; ++i) {
      t[idx[i]] = a[i][m] / a[i][i];
      ok = ok && t[idx[i]] >= 0;
    }
    if (!ok) continue;
    const double v = objective(t);
    if (v < best_v) {
      best_v = v;
      std::copy(t, t + 3, best);
    }
  }
  theta_ = {best[0], best[1], best[2]};
}

double StepBudget::chunk_ms(int n, int depth) const {
  if (n <= 0) return 0;
  if (!fitted()) return token_ms_ * n;
  const auto f = features(n, depth);
  return theta_[0] * f[0] + theta_[1] * f[1] + theta_[2] * f[2];
}

int StepBudget::chunk_tokens(double room_ms, int depth, int max_n) const {
  if (max_n <= 0 || chunk_ms(1, depth) > room_ms) return 0;
  int lo = 1, hi = max_n;  // chunk_ms grows with n: the largest that fits
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (chunk_ms(mid, depth) <= room_ms)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

int StepRoom::size(int max_n, int pending, int depth, int last_chunk, bool short_prompt) const {
  int n = std::min(max_n, pending);
  if (n <= 0) return 0;
  if (short_prompt && n == pending && costs_.chunk_ms(n, depth) <= short_room_) return n;
  // Growing at most twofold a step: a fit that underestimates the next size
  // up costs one step a little over, not one far over.
  if (last_chunk > 0) n = std::min(n, 2 * last_chunk + min_first_);
  const int fit = costs_.chunk_tokens(room_, depth, n);
  return first_ ? std::max(fit, std::min(n, min_first_)) : fit;
}

void StepRoom::take(int n, int depth) {
  const double ms = costs_.chunk_ms(n, depth);
  room_ -= ms;
  short_room_ -= ms;
  first_ = false;
}

}  // namespace tern::sched
