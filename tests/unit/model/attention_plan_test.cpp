// AttentionPlan against the cache's own one-call-per-head attention: the
// tasks it plans (token blocks, split-K segments and their merge) must give
// exactly the numbers of kv.attend() over each entry's tokens, for decodes
// deep in a context (split), small chunks at depth (split), prompts (blocks)
// and a bidirectional media run (one block per token); and an encoder's
// plan, every token of an entry seeing all of it.
#include "tern/model/attention_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "../kv/kv_test_util.h"
#include "tern/core/task_pool.h"
#include "tern/kv/paged_kv.h"

namespace tern {
namespace {

using kv::test::Conv;
using kv::test::FakeModel;

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 7 + salt * 131) % 1000;
  return t;
}

TEST(AttentionPlan, TasksGiveTheNumbersOfOneAttendPerHead) {
  FakeModel fm;
  fm.n_layers = 1;
  fm.n_kv_heads = 2;
  fm.head_dim = 16;
  fm.group = 3;
  kv::PagedKv kv(kv::test::small_config(fm, kv::KvType::Int8Fp8, 32, 600));
  const int seg = kv.attend_segment_tokens();
  // Contexts before the step under test, and the tokens each adds in it.
  struct Case {
    int ctx, n_new;
    bool media;  // the new tokens are one bidirectional run
  };
  const Case cases[] = {{3 * seg + 4, 1, false},  // a decode deep in the context: split
                        {2 * seg, 3, false},      // a small chunk at depth: split
                        {0, 40, false},           // a prompt: blocks
                        {10, 6, true}};           // an image's rows: one block per token
  std::vector<Conv> convs;
  for (int i = 0; i < 4; ++i) convs.emplace_back(fm, tokens(cases[i].ctx + cases[i].n_new, i));
  for (int i = 0; i < 4; ++i) {
    convs[size_t(i)].seq = kv.create();
    if (cases[i].ctx > 0) kv::test::run_step(kv, fm, {{&convs[size_t(i)], cases[i].ctx}});
  }

  // The step: every entry's new tokens, K and V written, q computed.
  const int hd = fm.head_dim, qd = fm.n_q() * hd;
  Batch batch;
  std::vector<EmbeddingRun> runs(4);
  std::vector<int> tok_pos;
  std::vector<SeqId> seqs;
  for (int i = 0; i < 4; ++i) {
    Conv& c = convs[size_t(i)];
    kv.reserve(c.seq, cases[i].n_new);
    seqs.push_back(c.seq);
    BatchEntry e;
    e.seq = c.seq;
    e.tokens = std::span<const int32_t>(c.toks).subspan(size_t(c.pos), size_t(cases[i].n_new));
    if (cases[i].media) {
      runs[size_t(i)] = {0, cases[i].n_new, nullptr, true};
      e.embeddings = std::span<const EmbeddingRun>(&runs[size_t(i)], 1);
    }
    batch.entries.push_back(e);
    for (int j = 0; j < cases[i].n_new; ++j) tok_pos.push_back(c.pos + j);
  }
  const int T = batch.total_tokens();
  std::vector<float> q(size_t(T) * qd), k(size_t(fm.kv_dim())), v(size_t(fm.kv_dim()));
  kv.begin_step(seqs);
  kv.begin_layer(0);
  int t = 0;
  for (int i = 0; i < 4; ++i) {
    Conv& c = convs[size_t(i)];
    for (int j = 0; j < cases[i].n_new; ++j, ++t) {
      const int p = c.pos + j;
      fm.kv(c.ph[size_t(p)], 0, k.data(), v.data());
      kv.write(c.seq, 0, p, k.data(), v.data());
      fm.q(c.ph[size_t(p)], 0, q.data() + size_t(t) * qd);
    }
  }

  // The oracle: one attend() per entry and KV head; a media run's tokens each
  // see the whole run.
  std::vector<float> want(size_t(T) * qd, -7.0f), got(size_t(T) * qd, -9.0f);
  t = 0;
  for (int i = 0; i < 4; ++i) {
    const SeqId s = convs[size_t(i)].seq;
    const int n = cases[i].n_new, pos0 = convs[size_t(i)].pos;
    for (int h = 0; h < fm.n_kv_heads; ++h) {
      const size_t at = size_t(t) * qd + size_t(h) * fm.group * hd;
      if (cases[i].media) {
        for (int j = 0; j < n; ++j)
          kv.attend(s, 0, h, pos0 + n - 1, 1, fm.group, q.data() + at + size_t(j) * qd, qd,
                    want.data() + at + size_t(j) * qd, qd);
      } else {
        kv.attend(s, 0, h, pos0, n, fm.group, q.data() + at, qd, want.data() + at, qd);
      }
    }
    t += n;
  }

  for (int threads : {1, 3}) {
    TaskPool pool(threads);
    AttentionPlan plan;
    plan.plan(batch, tok_pos, {.n_kv_heads = fm.n_kv_heads, .group = fm.group, .head_dim = hd}, kv);
    if (kv.can_split()) {
      EXPECT_EQ(plan.split_tokens(), 2u);  // the deep decode and the chunk at depth
    }
    EXPECT_GE(plan.block_tasks(), 2u + 6u);  // the prompt's blocks, the run's tokens
    std::fill(got.begin(), got.end(), -9.0f);
    plan.run(batch, 0, tok_pos, kv, q.data(), got.data(), pool);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "threads " << threads;
  }

  // An encoder's plan (not causal): blocks of tokens that all see their
  // entry's every position give the numbers of one attend() per token up to
  // the entry's last position.
  t = 0;
  for (int i = 0; i < 4; ++i) {
    const SeqId s = convs[size_t(i)].seq;
    const int n = cases[i].n_new, last = convs[size_t(i)].pos + n - 1;
    for (int h = 0; h < fm.n_kv_heads; ++h)
      for (int j = 0; j < n; ++j) {
        const size_t at = size_t(t + j) * qd + size_t(h) * fm.group * hd;
        kv.attend(s, 0, h, last, 1, fm.group, q.data() + at, qd, want.data() + at, qd);
      }
    t += n;
  }
  for (int threads : {1, 3}) {
    TaskPool pool(threads);
    AttentionPlan plan;
    plan.plan(batch, tok_pos,
              {.n_kv_heads = fm.n_kv_heads, .group = fm.group, .head_dim = hd, .causal = false},
              kv);
    EXPECT_EQ(plan.split_tokens(), 0u);
    EXPECT_LT(plan.block_tasks(), size_t(T));  // tokens share blocks
    std::fill(got.begin(), got.end(), -9.0f);
    plan.run(batch, 0, tok_pos, kv, q.data(), got.data(), pool);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "not causal, threads " << threads;
  }
  kv.end_step();
}

}  // namespace
}  // namespace tern
