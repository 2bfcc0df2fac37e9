#pragma once
// How one layer's attention over a batch is cut into task-pool tasks, and
// running them. Model::attention_in computes q, k and v, writes K and V to
// the cache, then hands the queries here: attn[t] = softmax(q_t . K) V per
// query head, each token against its own sequence's KV (causally, within a
// sliding window on local layers, bidirectionally across a media run).
//
// Two kinds of task, both one KV head wide (GQA: the head's `group` query
// heads share every K/V row read):
//   - a block: consecutive tokens of one sequence (at most 32 query rows);
//     blocks run latest (longest context) first;
//   - split-K: a decoding token, or a prompt chunk of at most one block deep
//     in a long context, is cut by KV segment instead -- one task per
//     (KV head, segment) writes its partial softmax state (m, l, acc), then a
//     merge per KV head folds the segments in order, which is what one task
//     does within itself, so the numbers are the same either way. (Unsplit, a
//     2-token chunk at depth 4096 was n_kv_heads long tasks: 3 on 2 workers
//     for SmolLM2, one worker idle a third of the time.)
#include <cstddef>
#include <utility>
#include <vector>

#include "tern/model/batch.h"

namespace tern {

class TaskPool;
namespace kv {
class PagedKv;
}

class AttentionPlan {
 public:
  struct Shape {
    int n_kv_heads = 0, group = 1, head_dim = 0;  // group: query heads per KV head
    int window = 0;  // 0: attend the whole prefix; > 0: a local layer's window (never split)
    // false (an encoder): every token of an entry attends every position up
    // to the entry's last (blocks of tokens sharing that horizon, never split).
    bool causal = true;
  };

  // Plans the tasks of one layer for a batch whose token t sits at position
  // tok_pos[t] (split-K only where the cache can: kv.can_split()).
  void plan(const Batch& batch, const std::vector<int>& tok_pos, const Shape& shape,
            const kv::PagedKv& kv);

  // Runs the planned tasks on the pool: q and attn are (tokens, q_dim) with
  // q_dim = n_kv_heads * group * head_dim; q pre-scaled. With n_parts > 1,
  // only part `part` of them: the blocks (latest first) cut into n_parts
  // runs of about equal cost (query rows x context), the split-K tokens and
  // their merges in the last part. Running parts 0 .. n_parts - 1, in any
  // order and with anything in between that leaves q, attn and the layer's
  // KV alone, gives the same bits as one run: every task writes rows of
  // attn no other task does (a step pauses between parts: Model::forward).
  void run(const Batch& batch, int layer, const std::vector<int>& tok_pos, kv::PagedKv& kv,
           const float* q, float* attn, TaskPool& pool, int part = 0, int n_parts = 1);

  size_t block_tasks() const { return blocks_.size(); }  // per KV head
  size_t split_tokens() const { return splits_.size(); }

 private:
  struct Block {
    int entry, t0, n_tok;
    int pos0;  // token t0 attends [0, pos0 + 1) (its position, or its bidirectional run's end - 1)
    int horizon = 0;  // > 0: every token of the block attends [0, horizon) (an encoder)
  };
  struct Split {
    int entry, t0, n_tok, n_seg;  // n_tok tokens (1: a decode; a few: a small chunk at depth)
    size_t off;                   // of their partial states in part_
  };
  void merge_splits(float* attn, TaskPool& pool);
  // The blocks (in run order, latest first) of part p of n: [first, end).
  std::pair<size_t, size_t> part_blocks(int p, int n) const;

  Shape s_;
  std::vector<Block> blocks_;
  std::vector<Split> splits_;
  std::vector<float> part_;   // the splits' per-segment softmax states
  std::vector<float> merge_;  // a head_dim accumulator per worker for the merges
};

}  // namespace tern
