#include "vit_ref.h"

#include <algorithm>
#include <cmath>

#include "vit_common.h"

namespace tern::vision::detail::ref {

Rows linear(const Rows& x, int T, Tensor w, Tensor b) {
  const int n_in = int(w->dims[0]), n_out = int(w->dims[1]);
  const Rows W = to_floats(w);
  const Rows B = b ? to_floats(b) : Rows(size_t(n_out), 0.0f);
  Rows y(size_t(T) * n_out);
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < n_out; ++o) {
      double s = B[size_t(o)];
      for (int i = 0; i < n_in; ++i) s += double(x[size_t(t) * n_in + i]) * W[size_t(o) * n_in + i];
      y[size_t(t) * n_out + o] = float(s);
    }
  return y;
}

Rows layer_norm(const Rows& x, int T, int D, Tensor w, Tensor b, float eps) {
  const Rows W = to_floats(w), B = to_floats(b);
  Rows y(x.size());
  for (int t = 0; t < T; ++t) {
    const float* r = &x[size_t(t) * D];
    double mean = 0, var = 0;
    for (int i = 0; i < D; ++i) mean += r[i];
    mean /= D;
    for (int i = 0; i < D; ++i) var += (r[i] - mean) * (r[i] - mean);
    const double inv = 1.0 / std::sqrt(var / D + eps);
    for (int i = 0; i < D; ++i) y[size_t(t) * D + i] = float((r[i] - mean) * inv * W[i] + B[i]);
  }
  return y;
}

Rows attention(const Rows& q, const Rows& k, const Rows& v, int T, int D, int H) {
  const int hd = D / H;
  const double scale = 1.0 / std::sqrt(double(hd));
  Rows out(size_t(T) * D);
  std::vector<double> p(static_cast<size_t>(T));
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i) {
      double mx = -1e300;
      for (int j = 0; j < T; ++j) {
        double s = 0;
        for (int d = 0; d < hd; ++d)
          s += double(q[size_t(i) * D + h * hd + d]) * k[size_t(j) * D + h * hd + d];
        p[size_t(j)] = s * scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      double sum = 0;
      for (int j = 0; j < T; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
      for (int d = 0; d < hd; ++d) {
        double o = 0;
        for (int j = 0; j < T; ++j) o += p[size_t(j)] * v[size_t(j) * D + h * hd + d];
        out[size_t(i) * D + h * hd + d] = float(o / sum);
      }
    }
  return out;
}

void block(Rows& x, int T, int D, int H, float eps, const VisionLayerWeights& L,
           float (*act)(float)) {
  Rows xn = layer_norm(x, T, D, L.ln1_w, L.ln1_b, eps);
  const Rows a = attention(linear(xn, T, L.q_w, L.q_b), linear(xn, T, L.k_w, L.k_b),
                           linear(xn, T, L.v_w, L.v_b), T, D, H);
  const Rows o = linear(a, T, L.o_w, L.o_b);
  for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  xn = layer_norm(x, T, D, L.ln2_w, L.ln2_b, eps);
  Rows f = linear(xn, T, L.up_w, L.up_b);
  for (float& v : f) v = act(v);
  const Rows d = linear(f, T, L.down_w, L.down_b);
  for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
}

}  // namespace tern::vision::detail::ref
