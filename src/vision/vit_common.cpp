#include "vit_common.h"

#include <algorithm>
#include <cmath>

#include "tern/kernels/dequant.h"

namespace tern::vision::detail {

std::vector<float> to_floats(Tensor t) {
  const int64_t row = t->dims[0];
  std::vector<float> out(size_t(t->n_elements()));
  for (int64_t r = 0; r < t->n_rows(); ++r)
    kernels::dequantize_row(t->type, t->data + size_t(r) * t->row_bytes(), &out[size_t(r * row)],
                            row);
  return out;
}

void extract_patches(const float* tile, int S, int P, int row_len, float* out) {
  const int side = S / P;
  for (int py = 0; py < side; ++py) {
    for (int px = 0; px < side; ++px) {
      float* row = out + size_t(py * side + px) * row_len;
      for (int c = 0; c < 3; ++c)
        for (int ky = 0; ky < P; ++ky)
          for (int kx = 0; kx < P; ++kx)
            row[(c * P + ky) * P + kx] =
                tile[(size_t(py * P + ky) * S + size_t(px * P + kx)) * 3 + c];
      std::fill(row + 3 * P * P, row + row_len, 0.0f);
    }
  }
}

void pixel_shuffle(const float* x, int side, int D, int m, float* out) {
  const int out_side = side / m;
  for (int Y = 0; Y < out_side; ++Y)
    for (int X = 0; X < out_side; ++X) {
      float* o = out + size_t(Y * out_side + X) * D * m * m;
      for (int dy = 0; dy < m; ++dy)
        for (int dx = 0; dx < m; ++dx) {
          const float* src = x + size_t((Y * m + dy) * side + X * m + dx) * D;
          std::copy_n(src, D, o + size_t(dx + m * dy) * D);
        }
    }
}

void avg_pool(const float* x, int side, int D, int m, float* out) {
  const int out_side = side / m;
  std::vector<double> acc(static_cast<size_t>(D));
  for (int Y = 0; Y < out_side; ++Y)
    for (int X = 0; X < out_side; ++X) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int dy = 0; dy < m; ++dy)
        for (int dx = 0; dx < m; ++dx) {
          const float* src = x + size_t((Y * m + dy) * side + X * m + dx) * D;
          for (int i = 0; i < D; ++i) acc[size_t(i)] += src[i];
        }
      float* o = out + size_t(Y * out_side + X) * D;
      for (int i = 0; i < D; ++i) o[i] = float(acc[size_t(i)] / (m * m));
    }
}

void rms_norm(float* x, const float* w, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = float(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
}

}  // namespace tern::vision::detail
