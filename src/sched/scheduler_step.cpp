// The token-boundary step, on the engine thread only: plan which tokens of
// which sequences run, reserve their KV, build one batch (token ids and
// media rows), run the forward pass, observe what it cost, and emit each
// sampled token. Then the media encodes get their slice.
#include <algorithm>
#include <chrono>
#include <iterator>

#include "admission.h"
#include "drafter.h"
#include "media_feed.h"
#include "model_drafter.h"
#include "sched_log.h"
#include "sequence.h"
#include "step_budget.h"
#include "step_buffers.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"

namespace tern::sched {
namespace {
// A pass with decodes pauses for an arrival only when what is left of it is
// predicted to take this many decode-only steps (should_yield).
constexpr double kYieldBesideDecodes = 2.0;
}  // namespace

void Scheduler::run_step() {
  last_step_ms_ = 0;
  last_step_decodes_ = 0;
  plan_step();
  reserve_step();
  if (build_batch()) {
    const auto t0 = Clock::now();
    yielded_ = {};
    if (forward(/*may_yield=*/true)) {
      observe_step(t0 + yielded_, Clock::now());  // the pauses are not the step's cost
      emit_step();
    }
  }
  if (step_decodes_ > 0) outside_step_ = Clock::now();  // the streams' last step (should_yield)
  park_preempted();
}

// Decode first (one token for every sequence whose context is in), then
// prefill chunks (plan_prefill) within the token budget. A sequence whose
// client has not drained its stream (kBacklogBytes of text pending) is
// paused: it keeps its KV and resumes after the drain.
void Scheduler::plan_step() {
  plan_.clear();
  pulled_decodes_ = 0;
  if (plan_long_pass()) return;
  int budget = opts_.step_tokens;
  for (auto& s : running_) {
    s->verify.clear();
    if (s->done || !s->decoding() || s->req.stream->backlogged()) continue;
    if (!s->req.media.empty() && media_ready(*s, 1) == 0) continue;
    plan_.push_back({s.get(), 1});
    budget -= 1;
  }
  const size_t n_decode = plan_.size();
  step_decodes_ = int(n_decode);
  if (opts_.draft_max > 0 && n_decode > 0 && n_decode <= size_t(opts_.spec_max_batch)) {
    // The step's guesses share draft_max: a verify of k guesses costs about a
    // k-token prefill chunk, so B sequences guessing draft_max each would
    // turn a bandwidth-bound decode into a compute-bound one.
    const int share = std::max(1, opts_.draft_max / int(n_decode));
    spec_batch_ = int(n_decode);
    model_wants_.clear();
    for (auto& [s, n] : plan_) {
      n += plan_draft(*s, std::min(budget, share));
      budget -= n - 1;
    }
    plan_model_drafts(budget);
  }
  plan_prefill(n_decode, budget);
}

bool Scheduler::short_prompt(const Sequence& s) const {
  return s.pending() + s.prompt_computed <= opts_.step_tokens;
}

// A long prompt beside decoding streams runs in a pass of its own, and the
// streams decode in its pauses (should_yield: one decode step each time they
// have waited the room itl_slack gives), instead of steps that carry the
// streams plus a prompt share sized to the same room. Deep in a long prompt
// that share is a few tokens, and each chunk reads the context's whole KV
// for them (a 2-token chunk at depth 3584 paid 6.3 ms of attention a token
// against 3.0 in chunks of 8 or more on a 2-vCPU Zen 3), so the prompt went
// at half its own pace per ms of room; its own pass takes chunks of about
// kLongPassRooms rooms, which pause between blocks (an FFN or a part of a
// layer's attention, a few ms). Only when every prompt waiting is long, text
// and not pooled, and every stream can decode in a pause (no media); with a
// short prompt waiting, paced steps run it first.
bool Scheduler::plan_long_pass() {
  constexpr double kLongPassRooms = 12;
  if (!opts_.long_prompt_passes || opts_.yield_ms <= 0 || opts_.itl_slack <= 1.0 ||
      !costs_->ready() || media_->pending() || !engine_.config().causal)
    return false;
  Sequence* longest = nullptr;
  int n_decode = 0;
  for (auto& s : running_) {
    if (s->done) continue;
    if (s->prefilling()) {
      if (s->embeds() || !s->req.media.empty() || short_prompt(*s)) return false;
      if (!longest) longest = s.get();  // admission order: the oldest
    } else if (s->decoding()) {
      if (!s->req.media.empty()) return false;
      if (!s->req.stream->backlogged()) ++n_decode;
    }
  }
  if (!longest || n_decode == 0) return false;
  const int most = std::min(opts_.step_tokens, longest->pending());
  const int n = std::clamp(
      costs_->chunk_tokens(kLongPassRooms * costs_->room_ms(opts_.itl_slack), longest->in_kv, most),
      std::min(kMinPrefillChunk, most), most);
  longest->last_chunk = n;
  plan_.push_back({longest, n});
  step_decodes_ = 0;
  pulled_decodes_ = n_decode;
  return true;
}

// A decoding sequence's guesses for this step (its verify entry: the token
// to feed, then the guesses); returns how many, at most `budget`. Never past
// the context or the request's max_tokens. The draft model's guesses come
// later, for all sequences at once (plan_model_drafts): until then the
// sequence holds the k tokens it wants of the budget.
int Scheduler::plan_draft(Sequence& s, int budget) {
  const double d = costs_->decode_ms();
  const double ratio = opts_.spec_cost_ratio > 0       ? opts_.spec_cost_ratio
                       : verify_token_ms_ > 0 && d > 0 ? verify_token_ms_ / d
                                                       : DraftLength::kDefaultCostRatio;
  int k = std::min(opts_.draft_max, budget);
  if (s.req.draft_max >= 0) k = std::min(k, s.req.draft_max);
  k = s.draft_len.choose(k, spec_batch_, ratio);
  k = std::min(k, n_ctx_ - s.in_kv - 1);
  if (s.req.params.max_tokens > 0) k = std::min(k, s.req.params.max_tokens - s.n_generated - 1);
  if (k <= 0) return 0;
  draft_.clear();
  if (!s.req.prediction.empty()) {
    const auto output = std::span<const int32_t>(s.tokens).last(size_t(s.n_generated));
    PredictionDrafter::propose(output, s.req.prediction, s.prediction_cursor, k, draft_);
  }
  s.verify_predicted = !draft_.empty();
  const SpecSource from =
      s.req.spec_source != SpecSource::Auto ? s.req.spec_source : opts_.spec_source;
  if (draft_.empty() && from != SpecSource::Draft) NgramDrafter::propose(s.tokens, k, draft_);
  if (draft_.empty() && from != SpecSource::Ngram && model_drafter_) {
    model_wants_.push_back({&s, k});
    return k;
  }
  if (draft_.empty()) return 0;
  s.verify.assign(1, s.tokens[size_t(s.in_kv)]);
  s.verify.insert(s.verify.end(), draft_.begin(), draft_.end());
  return int(draft_.size());
}

// Sequences that finished, failed or were preempted lose their draft KV.
void Scheduler::forget_drafts() {
  if (!model_drafter_) return;
  live_keys_.clear();
  for (const auto& s : running_)
    if (s->has_kv() && !s->done) live_keys_.push_back(s->order);
  model_drafter_->retain(live_keys_);
}

// The draft model guesses for every sequence plan_draft left to it, in one
// batched pass per guess position; each gives back to the step's budget
// what it set aside and did not get.
void Scheduler::plan_model_drafts(int& budget) {
  if (!model_drafter_ || model_wants_.empty()) return;
  std::vector<ModelDrafter::Want> wants;
  wants.reserve(model_wants_.size());
  for (auto& [s, k] : model_wants_) {
    s->guesses.clear();
    wants.push_back({s->order, std::span<const int32_t>(s->tokens).first(size_t(s->in_kv) + 1), k,
                     &s->guesses});
  }
  model_drafter_->propose(wants);
  for (auto& [s, k] : model_wants_) {
    const int got = int(s->guesses.size());
    budget += k - got;
    for (auto& [p, n] : plan_)
      if (p == s) n = 1 + got;
    if (got == 0) continue;
    s->verify.assign(1, s->tokens[size_t(s->in_kv)]);
    s->verify.insert(s->verify.end(), s->guesses.begin(), s->guesses.end());
  }
}

// Appends to plan_ (after its n_decode decode entries) this step's prefill
// chunks within `budget` tokens.
void Scheduler::plan_prefill(size_t n_decode, int budget) {
  // Prefill: each client's oldest prompt before anyone's second (fair between
  // clients); within a rank, prompts shorter than one step first (a short
  // request arriving during a long prefill gets its first token at once),
  // then oldest first. Long prompts still progress every step: a short
  // prompt only goes first, it never takes more than what is left.
  for (auto& s : running_) {
    if (s->done || !s->prefilling()) continue;
    int rank = 0;
    for (size_t i = n_decode; i < plan_.size(); ++i)
      rank += plan_[i].first->req.client == s->req.client;
    plan_.push_back({s.get(), rank});
  }
  // A short prompt: at most one step's tokens to prefill in all, counting
  // what it has prefilled already (a long prompt's last chunk is not a short
  // request, and a short one that had to be chunked stays first in line
  // instead of waiting behind the long one for the rest). An embedding or
  // rerank prompt never is: no stream waits on its first token, and the
  // whole-prompt allowance (up to three steps' room in one step) would
  // stretch the running streams' gaps for each of a big request's inputs.
  const auto is_short = [this](const Sequence& s) { return !s.embeds() && short_prompt(s); };
  std::sort(plan_.begin() + long(n_decode), plan_.end(), [&](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second < b.second;
    const bool qa = is_short(*a.first), qb = is_short(*b.first);
    if (qa != qb) return qa;
    return a.first->order < b.first->order;
  });
  // With streams decoding, the chunks' predicted cost keeps the step within
  // itl_slack decode-only steps (step_budget.h; StepRoom: short prompts go
  // whole within three steps' room, the others get what fits). Every
  // StepBudget::kProbeEvery-th such step is decode-only, to keep the decode
  // cost current; not while a short prompt waits.
  const bool paced = n_decode > 0 && opts_.itl_slack > 0 && costs_->ready();
  double room_ms = 0, pooled_ms = 0;
  bool probe = false;
  if (paced) {
    room_ms = costs_->room_ms(opts_.itl_slack);
    pooled_ms = costs_->room_ms(std::min(opts_.itl_slack, opts_.pooled_slack));
    if (media_->pending()) room_ms /= 2;  // the other half goes to the image encodes
    probe = costs_->probe_due() && plan_.size() > n_decode && !is_short(*plan_[n_decode].first);
  }
  // Until the cost model has seen a mixed step, a step beside decodes takes
  // at most kLearnTokens of prompt: the step it learns from is not a long gap.
  if (n_decode > 0 && opts_.itl_slack > 0 && !paced) budget = std::min(budget, kLearnTokens);
  StepRoom room(*costs_, room_ms, kMinPrefillChunk);
  // Embedding and rerank prompts share a smaller room (pooled_slack): nobody
  // waits on their first token, so the streams' gaps come first.
  StepRoom pooled(*costs_, std::min(room_ms, pooled_ms), kMinPrefillChunk);
  const bool whole = !engine_.config().causal;
  // Nothing decodes and a short prompt waits: this step is the short
  // prompts' alone (their first tokens come after a short pass, not after a
  // full step_tokens chunk of a long prompt, which goes in the next step;
  // never two such steps in a row, so short prompts that keep coming
  // without decoding cannot starve a long one).
  bool shorts_only = false;
  if (n_decode == 0 && !paced && !last_shorts_only_)
    for (size_t i = n_decode; i < plan_.size() && !shorts_only; ++i)
      shorts_only = is_short(*plan_[i].first) && plan_[i].first->req.media.empty();
  last_shorts_only_ = shorts_only;
  size_t kept = n_decode;
  for (size_t i = n_decode; i < plan_.size() && budget > 0 && !probe; ++i) {
    Sequence& s = *plan_[i].first;
    if (shorts_only && !is_short(s)) continue;
    int n = paced ? room.size(budget, s.pending(), s.in_kv, s.last_chunk, is_short(s))
                  : std::min(budget, s.pending());
    if (paced && s.embeds())
      n = std::min(n, pooled.size(n, s.pending(), s.in_kv, s.last_chunk, false));
    if (!s.req.media.empty()) n = MediaFeed::fit_chunk(s, media_ready(s, n));
    // An encoder's sequence attends both ways: all of it in one step (the
    // step's first prefill may exceed the budget for it, so none waits for ever).
    if (whole) n = s.pending() <= budget || kept == n_decode ? s.pending() : 0;
    if (n == 0) continue;  // waits before an image being encoded, or no room left
    if (paced) room.take(n, s.in_kv);
    if (paced && s.embeds()) pooled.take(n, s.in_kv);
    s.last_chunk = n;
    plan_[kept++] = {&s, n};
    budget -= n;
  }
  plan_.resize(kept);
}

// Each planned sequence gets its KV room in admission order, which may
// preempt newer ones (they drop out of the plan).
void Scheduler::reserve_step() {
  std::vector<std::pair<Sequence*, int>>& order = plan_order_;
  order.assign(plan_.begin(), plan_.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first->order < b.first->order; });
  for (auto& [s, n] : order) {
    if (s->done || !s->has_kv()) continue;  // preempted for an older one
    reserve_for(*s, n);
  }
}

bool Scheduler::build_batch() {
  batch_.entries.clear();
  entry_seq_.clear();
  runs_.clear();
  entry_runs_.clear();
  for (auto& [s, n] : plan_) {
    if (s->done || !s->has_kv()) continue;
    // Making room for one sequence may have found a block another one needs
    // unreadable on flash.
    if (const std::string& why = engine_.failure(s->seq); !why.empty()) {
      kv_failed(*s, why);
      continue;
    }
    const size_t first_run = runs_.size();
    if (!s->req.media.empty()) {
      try {  // media rows, fetched on first need from a source that cannot encode in slices
        media_->runs(*s, n, runs_);
      } catch (const std::exception& e) {
        runs_.resize(first_run);
        logger()->error("[{}] image: {}", s->req.id, e.what());
        finish(*s, FinishReason::Error, e.what());
        continue;
      }
    }
    entry_runs_.push_back({first_run, runs_.size()});
    if (!s->verify.empty()) {  // logits for every position; KV kept only where agreed
      BatchEntry e{s->seq, s->verify, LogitsMode::All, {}, s->req.lora};
      e.commit = false;
      batch_.entries.push_back(e);
      entry_seq_.push_back(s);
      continue;
    }
    const bool last = s->in_kv + n == int(s->tokens.size());
    // An embedding pools every position's hidden state; a generation samples
    // from the last position's logits.
    const LogitsMode mode =
        s->embeds() ? LogitsMode::Hidden : (last ? LogitsMode::Last : LogitsMode::None);
    batch_.entries.push_back({s->seq,
                              std::span<const int32_t>(s->tokens.data() + s->in_kv, size_t(n)),
                              mode,
                              {},
                              s->req.lora});
    entry_seq_.push_back(s);
  }
  for (size_t i = 0; i < batch_.entries.size(); ++i) {  // runs_ no longer grows
    const auto [b, e] = entry_runs_[i];
    batch_.entries[i].embeddings = std::span<const EmbeddingRun>(runs_.data() + b, e - b);
  }
  return !batch_.entries.empty();
}

bool Scheduler::forward(bool may_yield) {
  try {
    if (!may_yield || opts_.yield_ms <= 0) {
      engine_.step(batch_, out_);
      return true;
    }
    const Engine::YieldCheck check = [this](int block, int n_blocks) {
      return should_yield(block, n_blocks);
    };
    struct InPass {  // marks the pass's sequences for the yield rounds
      std::vector<Sequence*>& seqs;
      explicit InPass(std::vector<Sequence*>& s) : seqs(s) {
        for (Sequence* q : seqs) q->in_pass = true;
      }
      ~InPass() {
        for (Sequence* q : seqs) q->in_pass = false;
      }
    } in_pass(entry_seq_);
    pass_t0_ = Clock::now();
    pass_first_block_ = 0;
    pass_yielded_ = false;
    outside_decodes_ = pulled_decodes_;  // they decode in this pass's pauses
    outside_prefill_ = false;
    bool done = engine_.step(batch_, out_, check);
    while (!done) {
      const auto p0 = Clock::now();
      try {  // whatever happens in the pause, the paused pass resumes
        yield_round();
      } catch (const std::exception& e) {
        logger()->error("a step's pause failed: {}", e.what());
      }
      const auto p1 = Clock::now();
      yielded_ += p1 - p0;
      pass_t0_ = p1;
      done = engine_.resume(batch_, out_, check);
    }
    return true;
  } catch (const std::exception& e) {
    logger()->error("forward pass over {} sequences failed: {}", batch_.entries.size(), e.what());
    for (Sequence* s : entry_seq_) finish(*s, FinishReason::Error, e.what());
    return false;
  }
}

// After `block` (an attention part or an FFN: Model::forward): pause when a request arrived that
// this pass has not seen, or, in a pass without decodes, when the sequences decoding outside it
// (admitted in an earlier pause) have waited a paced step's room since their last step, and what is
// left of the pass (its blocks so far at their pace) is worth more than yield_ms. A pass with
// decodes pauses for arrivals once, and only when what is left of it is worth kYieldBesideDecodes
// decode steps (a paced step, at most itl_slack = 2 of them, does not pause): each pause costs its
// streams one more pass (the weights read again) besides the newcomers' prompts, and arrivals come
// in bursts (streams that finished together asking again). With 8 streams and a 4096-token prompt
// (bench/fairness.py), pausing paced steps too gave the short request 1.2-1.6x
// its idle TTFT instead of 1.6-2.4x, but the streams' p99 gap 1.6-2.4x instead
// of 1.45-1.8x. The yield round decides what can run.
bool Scheduler::should_yield(int block, int n_blocks) {
  const uint64_t arrived = arrivals_.load(std::memory_order_relaxed);
  const auto now = Clock::now();
  const int done = block + 1 - pass_first_block_;
  const int left = n_blocks - block - 1;
  if (done <= 0) return false;
  const double rest = ms_between(pass_t0_, now) / done * left;
  if (rest < opts_.yield_ms) return false;
  // Beside a pass with decodes (a paced one) the newcomers wait for its end
  // to decode; beside a long pass of prompts alone, they decode in pauses.
  // A short prompt that a pause began and could not finish goes on in the
  // next block's pause: its request waits on it, and the streams with it.
  bool due = outside_prefill_ && step_decodes_ == 0;
  if (!due && outside_decodes_ > 0 && step_decodes_ == 0) {
    const double room =
        costs_->ready() ? costs_->room_ms(std::max(opts_.itl_slack, 1.5)) : opts_.yield_ms;
    // Pause now when waiting for the next block would overshoot the room.
    due = ms_between(outside_step_, now) + rest / left >= room;
  }
  bool newcomer = arrived != yield_seen_;
  if (newcomer && step_decodes_ > 0)
    newcomer = !pass_yielded_ && rest >= kYieldBesideDecodes * costs_->decode_ms();
  if (!newcomer && !due) return false;
  if (newcomer) pass_yielded_ = true;
  yield_seen_ = arrived;
  pass_first_block_ = block + 1;
  return true;
}

void Scheduler::swap_step_buffers() {
  StepBuffers& a = *aside_;
  std::swap(batch_, a.batch);
  std::swap(out_, a.out);
  std::swap(entry_seq_, a.entry_seq);
  std::swap(plan_, a.plan);
  std::swap(runs_, a.runs);
  std::swap(entry_runs_, a.entry_runs);
}

// The paused pass's sequences are left alone: the requests taken here are
// new sequences, their KV room comes without preempting or spilling anyone
// (the engine keeps the paused pass's blocks where they are). What earlier
// pauses ran and finished is retired first, so that its batch slot and KV
// go to the next newcomer: before, a second short prompt arriving during
// one long pass found max_batch taken by the first (done) and waited for
// the pass's end, and then for the next chunk's whole pass (300-800 ms
// against 50 idle on a 2-vCPU Zen 3, bench/fairness.py).
void Scheduler::yield_round() {
  retire_finished();  // never the paused pass's sequences (in_pass)
  std::vector<Request> admitted;
  take_yield_requests(admitted);
  const size_t first = running_.size();
  if (!admitted.empty()) {
    start_sequences(admitted);
    update_gauges();  // they count as running before their first token, as at a boundary
  }
  swap_step_buffers();
  struct SwapBack {  // the paused pass gets its buffers back on every path
    Scheduler& s;
    ~SwapBack() { s.swap_step_buffers(); }
  } swap_back{*this};
  plan_.clear();
  // A decode for every sequence outside the paused pass that decodes (what
  // earlier pauses admitted; plain decodes, no guesses).
  for (size_t i = 0; i < first; ++i) {
    Sequence& s = *running_[i];
    if (s.in_pass || s.done || !s.has_kv() || !s.decoding() || !s.req.media.empty() ||
        s.req.stream->backlogged())
      continue;
    if (engine_.reserve(s.seq, 1).room != Engine::Room::Ok) continue;
    plan_.push_back({&s, 1});
  }
  const size_t n_decode = plan_.size();
  // Beside decodes (paused or here), prompts get a paced step's room
  // (StepRoom: a short prompt whole within kShortSteps rooms, the others the
  // chunk that fits): the newcomers admitted here and, in a long prompt's
  // own pass (plan_long_pass, whose pauses are the streams' steps), what
  // earlier pauses admitted and did not finish, short ones only. Beside any
  // other pass, a newcomer that does not go whole waits for the next step.
  const bool paced = (step_decodes_ > 0 || n_decode > 0) && opts_.itl_slack > 0 && costs_->ready();
  StepRoom room(*costs_, costs_->room_ms(opts_.itl_slack), kMinPrefillChunk);
  int budget = opts_.step_tokens;
  const bool long_pass = step_decodes_ == 0 && pulled_decodes_ > 0;
  const size_t from = long_pass ? 0 : first;
  for (size_t i = from; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.in_pass || s.done || !s.has_kv() || s.pending() < 1) continue;
    const bool whole_short = short_prompt(s);
    // (a long one waiting behind the pass's gets passes of its own after it)
    if (i < first && (!s.prefilling() || !whole_short || s.embeds() || !s.req.media.empty()))
      continue;
    int n = std::min(budget, s.pending());
    if (paced) {
      n = room.size(n, s.pending(), s.in_kv, s.last_chunk, whole_short);
      if (!long_pass && n < s.pending()) n = 0;  // only a long pass's pauses go on with it
    }
    if (n == 0) continue;
    if (engine_.reserve(s.seq, n).room != Engine::Room::Ok) continue;
    if (paced) room.take(n, s.in_kv);
    s.last_chunk = n;
    budget -= n;
    plan_.push_back({&s, n});
  }
  if (!plan_.empty()) {
    metrics_.step_yields += 1;
    metrics_.yield_prompts += plan_.size() - n_decode;
  }
  const auto t0 = Clock::now();
  if (build_batch() && forward(/*may_yield=*/false)) {
    metrics_.steps += 1;
    metrics_.step_tokens += uint64_t(batch_.total_tokens());
    // A pause's step is a step like any other to the cost model: in a long
    // prompt's own passes it is the streams' only one, and their decode cost
    // follows them (more streams, deeper contexts) from here.
    observe_costs(ms_between(t0, Clock::now()));
    emit_step();
  }
  if (logger()->should_log(spdlog::level::trace))
    logger()->trace("yield: decode={} prompts={} tokens={} ms={:.2f}", n_decode,
                    plan_.size() - n_decode, batch_.total_tokens(), ms_between(t0, Clock::now()));
  outside_decodes_ = 0;
  outside_prefill_ = false;
  for (auto& [s, n] : plan_) {
    if (!s->done && s->decoding()) ++outside_decodes_;
    if (!s->done && s->prefilling() && short_prompt(*s)) outside_prefill_ = true;
  }
  outside_step_ = Clock::now();
}

// Under mu_: the queued requests a yield round can run whole: text-only
// generations, not waiting for a sibling, in queue order, while their
// prompts come to at most step_tokens in all (the pause's pass, and its
// workspace, stay within a step's size) and a batch slot, a KV sequence
// and (without spilling) their KV blocks are free. None while preempted
// sequences wait for room.
void Scheduler::take_yield_requests(std::vector<Request>& admitted) {
  AdmissionRoom room = admission_room();
  std::lock_guard lock(mu_);
  if (!preempted_.empty() || stop_ || cancel_all_ || !accepting_) return;
  int64_t tokens = 0;  // a pause's pass is bounded like a step: step_tokens of prompts
  for (auto it = queue_.begin(); it != queue_.end();) {
    const Request& r = *it;
    const int64_t n = int64_t(r.prompt.size());
    if (r.stream->cancelled() || !r.media.empty() || r.after || r.pooling != Pooling::None ||
        tokens + n > opts_.step_tokens || !room.fits(n)) {
      ++it;
      continue;
    }
    tokens += n;
    room.take(n);
    admitted.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  metrics_.queue_depth = int64_t(queue_.size());
  n_running_ += int64_t(admitted.size());
}

// The step's metrics, and its cost for the model that sizes the next steps'
// prefill share (step_budget.h).
void Scheduler::observe_step(Clock::time_point t0, Clock::time_point t1) {
  last_step_ms_ = seconds_between(t0, t1) * 1e3;
  if (logger()->should_log(spdlog::level::trace)) trace_step(t0);
  prev_step_end_ = t1;
  metrics_.steps += 1;
  metrics_.step_tokens += uint64_t(batch_.total_tokens());
  metrics_.step_duration.observe(seconds_between(t0, t1));
  observe_costs(last_step_ms_);
}

// The step cost model learns from the step just run (batch_, before its
// tokens are emitted) that took `ms`.
void Scheduler::observe_costs(double ms) {
  int decodes = 0, guessed = 0;
  bool prefill = false;
  for (size_t i = 0; i < batch_.entries.size(); ++i) {
    const int n = int(batch_.entries[i].tokens.size());
    if (n == 1 && entry_seq_[i]->decoding())
      ++decodes;
    else
      costs_->add_chunk(n, entry_seq_[i]->in_kv);
    if (entry_seq_[i]->decoding())
      guessed += n - 1;
    else
      prefill = true;
  }
  // What a guess costs: a step of decodes and verifies only, over the
  // decode-only step's time (DraftLength weighs it against what guesses yield).
  if (guessed > 0 && !prefill && costs_->decode_ms() > 0) {
    const double v = std::max(0.0, ms - costs_->decode_ms()) / guessed;
    verify_token_ms_ = verify_token_ms_ > 0 ? 0.8 * verify_token_ms_ + 0.2 * v : v;
  }
  last_step_decodes_ = decodes;
  costs_->observe(decodes, ms, runs_.empty());
}

void Scheduler::trace_step(Clock::time_point t0) const {
  std::string pre;
  int dec = 0, dec_ctx = 0;
  for (size_t i = 0; i < batch_.entries.size(); ++i) {
    const int n = int(batch_.entries[i].tokens.size());
    if (n == 1 && entry_seq_[i]->decoding()) {
      ++dec;
      dec_ctx += entry_seq_[i]->in_kv;
    } else {  // "v": a decoding sequence's verify entry (its token and guesses)
      fmt::format_to(std::back_inserter(pre), " {}{}@{}", entry_seq_[i]->decoding() ? "v" : "", n,
                     entry_seq_[i]->in_kv);
    }
  }
  const auto th = costs_->coefficients();
  logger()->trace(
      "step decode={} ctx={} prefill=[{}] ms={:.2f} gap={:.2f} model: decode={:.2f} "
      "a={:.3f} b={:.3f} c={:.3f}",
      dec, dec_ctx, pre, last_step_ms_, ms_between(prev_step_end_, t0), costs_->decode_ms(), th[0],
      th[1], th[2]);
}

void Scheduler::emit_step() {
  for (size_t i = 0; i < batch_.entries.size(); ++i) {
    Sequence& s = *entry_seq_[i];
    const auto& e = batch_.entries[i];
    if (!e.commit) {
      emit_verified(s, int(i));
      continue;
    }
    const int n = int(e.tokens.size());
    s.in_kv += n;
    if (!s.req.media.empty()) MediaFeed::release_passed(s);
    if (const std::string& why = engine_.failure(s.seq); !why.empty()) {
      kv_failed(s, why);  // its logits are not to be trusted
      continue;
    }
    if (s.n_generated == 0) {  // the prompt (or its recompute before the first token)
      s.prompt_computed += n;
      metrics_.prompt_tokens += uint64_t(n);
    }
    if (e.logits == LogitsMode::Hidden) {
      s.pooler->add(out_.hidden_rows(int(i), n), n);
      if (s.pending() == 0) finish_embedding(s);
      continue;
    }
    if (e.logits == LogitsMode::None) continue;
    if (s.req.params.max_tokens == 0) {
      finish(s, FinishReason::Length);
      continue;
    }
    emit_token(s, s.sampler.sample(out_.last(int(i))));
  }
}

// A verify entry: the sampler takes the rows in order, each token as plain
// decoding would sample it; while it agrees with the guess after it, the next
// row is that token's logits too. The KV of the fed token and of the agreed
// guesses is committed; the rest is left uncommitted (the next step writes
// over it), so the prefix cache never sees a rejected token.
void Scheduler::emit_verified(Sequence& s, int entry) {
  if (const std::string& why = engine_.failure(s.seq); !why.empty()) {
    kv_failed(s, why);
    return;
  }
  const int k = int(s.verify.size()) - 1;
  const int row0 = out_.first_row[size_t(entry)];
  int emitted = 0;
  for (int j = 0; j <= k; ++j) {
    const int32_t t = s.sampler.sample(out_.row(row0 + j));
    emit_token(s, t);
    ++emitted;
    if (s.done || j == k || t != s.verify[size_t(j + 1)]) break;
  }
  engine_.commit(s.seq, std::span<const int32_t>(s.verify.data(), size_t(emitted)));
  s.in_kv += emitted;
  const int accepted = emitted - 1;
  s.draft_n += k;
  s.draft_accepted += accepted;
  if (s.verify_predicted) {
    s.prediction_accepted += accepted;
    s.prediction_rejected += k - accepted;
  }
  metrics_.draft_tokens += uint64_t(k);
  metrics_.draft_accepted_tokens += uint64_t(accepted);
  s.draft_len.observe(k, accepted);
  s.verify.clear();
}

int Scheduler::media_ready(Sequence& s, int n) {
  try {
    return media_->ready(s, n);
  } catch (const std::exception& e) {
    logger()->error("[{}] image: {}", s.req.id, e.what());
    finish(s, FinishReason::Error, e.what());
    return 0;
  }
}

// After a step: the pending media encodes get a time slice. While streams
// decode, step + slice stay within itl_slack decode-only steps (the encode
// gets at least one stage, so it always progresses); otherwise full speed.
void Scheduler::advance_media() {
  if (!media_->pending()) return;
  constexpr double kFullSpeedSliceMs = 200;  // between looks at new work
  double budget = kFullSpeedSliceMs;
  if (last_step_decodes_ > 0 && opts_.itl_slack > 0) {
    const double decode = costs_->decode_ms() > 0 ? costs_->decode_ms() : last_step_ms_;
    budget = opts_.itl_slack * decode - last_step_ms_;
  }
  media_->advance(engine_.pool(), budget);
}

}  // namespace tern::sched
