#include "tern/model/pooling.h"

#include <cmath>

#include "tern/core/error.h"
#include "tern/model/rank_head.h"

namespace tern {

const char* to_string(Pooling p) {
  switch (p) {
    case Pooling::None:
      return "none";
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
    case Pooling::Rank:
      return "rank";
  }
  return "none";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  for (Pooling p : {Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last, Pooling::Rank})
    if (name == to_string(p)) return p;
  return std::nullopt;
}

Pooling resolve_pooling(Pooling from_file, std::optional<Pooling> flag) {
  if (flag && *flag != Pooling::None) return *flag;
  return from_file != Pooling::None ? from_file : Pooling::Mean;
}

Pooler::Pooler(Pooling p, int d, const RankHead* head)
    : pooling_(p), rows_(p), head_(p == Pooling::Rank ? head : nullptr), d_(d) {
  if (p == Pooling::None || d <= 0)
    throw InvalidArgument("Pooler: needs a pooling type and a width");
  if (p == Pooling::Rank) {
    if (!head) throw InvalidArgument("rank pooling needs a model with a classification head");
    if (head->d_in() != d) throw InvalidArgument("Pooler: the rank head's width is not d");
    rows_ = head->rows();
  }
  reset();
}

void Pooler::reset() {
  n_ = 0;
  if (rows_ == Pooling::Mean)
    sum_.assign(size_t(d_), 0.0);
  else
    row_.assign(size_t(d_), 0.0f);
}

void Pooler::add(std::span<const float> rows, int n) {
  if (n <= 0) return;
  if (rows.size() < size_t(n) * size_t(d_)) throw InvalidArgument("Pooler: fewer rows than n");
  const size_t d = size_t(d_);
  switch (rows_) {
    case Pooling::Mean:
      // In double and in position order: the same sum however the rows were chunked.
      for (int t = 0; t < n; ++t)
        for (size_t i = 0; i < d; ++i) sum_[i] += double(rows[size_t(t) * d + i]);
      break;
    case Pooling::Cls:
      if (n_ == 0) row_.assign(rows.begin(), rows.begin() + long(d));
      break;
    case Pooling::Last:
      row_.assign(rows.begin() + long(size_t(n - 1) * d), rows.begin() + long(size_t(n) * d));
      break;
    case Pooling::None:
    case Pooling::Rank:  // never rows_ (the head's rows are one of the above)
      break;
  }
  n_ += n;
}

std::vector<float> Pooler::result() const {
  if (n_ == 0) throw InvalidArgument("Pooler: no rows to pool");
  std::vector<float> out = row_;
  if (rows_ == Pooling::Mean) {
    out.resize(static_cast<size_t>(d_));
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(sum_[i] / double(n_));
  }
  return head_ ? head_->apply(out) : out;
}

void l2_normalize(std::span<float> v) {
  double ss = 0;
  for (float x : v) ss += double(x) * double(x);
  if (ss <= 0) return;
  const double inv = 1.0 / std::sqrt(ss);
  for (float& x : v) x = float(double(x) * inv);
}

std::vector<float> finish_embedding(std::span<const float> pooled, int dims, bool normalize) {
  const size_t n = dims > 0 && size_t(dims) < pooled.size() ? size_t(dims) : pooled.size();
  std::vector<float> out(pooled.begin(), pooled.begin() + long(n));
  if (normalize) l2_normalize(out);
  return out;
}

}  // namespace tern
