// The paged KV cache through the real engine and the default model (skipped
// when the model file is absent). Within one KV type, every path a block can
// take -- computed in DRAM, shared from the prefix cache, spilled to flash and
// streamed back layer by layer, evicted to flash and reloaded -- keeps its
// bytes, so greedy decoding gives bit-identical logits at every step whichever
// path the KV took. Prefix reuse stops at the first block that differs, and a
// flash fault fails only the sequence whose KV needed the failed I/O.
//
// Sizes (SmolLM2-135M: 30 layers, 3 kv heads x 64): one 32-token block is
// 720 KiB in f16, 383 KiB in int8-fp8, 293 KiB in int4-fp8. Flash staging
// takes dram/16 and holds (dram/16) / (2 layer sets x block/30) blocks, so a
// DRAM budget of B blocks streams about B more; the "spilled" budgets below
// give 5-7 frames for a sequence of 8 blocks (200 prompt + 40 generated).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tern/engine/engine.h"
#include "tern/kv/paged_kv.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern {
namespace {

constexpr int kBlock = 32;      // the engine's block size
constexpr int kPrompt = 200;    // 6 full blocks + 8 tokens
constexpr int kReusable = 192;  // (kPrompt - 1) / 32 full blocks: the last token is always computed
constexpr int kGen = 40;        // greedy tokens per generation
constexpr int kChunk = 64;      // prefill chunk on the small-DRAM engines

// A folder under the test temp directory, removed afterwards.
struct TempDir {
  explicit TempDir(const std::string& name) : path(test::temp_path(name)) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

int32_t argmax(std::span<const float> x) {
  return int32_t(std::max_element(x.begin(), x.end()) - x.begin());
}

// One greedy generation: the prompt in chunks, then one token a step.
struct Gen {
  SeqId seq = -1;
  std::vector<int32_t> prompt;
  int reused = 0;               // prompt tokens attach_prefix() found cached
  int fed = 0;                  // prompt tokens in the KV (reused or computed)
  std::vector<int32_t> tokens;  // tokens[i] = argmax(logits row i)
  std::vector<float> logits;    // (rows, n_vocab): the rows that chose each token
  int n_gen = kGen;             // tokens to generate
  int32_t feed = 0;             // the token a decode step appends
  bool done() const { return int(tokens.size()) >= n_gen; }
};

Gen start(Engine& e, const std::vector<int32_t>& prompt, bool attach,
          const kv::SeqKeys& keys = {}) {
  Gen g;
  g.seq = e.new_sequence(keys);
  g.prompt = prompt;
  if (attach) g.fed = g.reused = e.attach_prefix(g.seq, prompt);
  return g;
}

// One engine step over every unfinished generation: its next prompt chunk
// (logits only at the prompt's end) or its last token. Records nothing when
// step() throws.
void step(Engine& e, std::initializer_list<Gen*> gens, int chunk) {
  Batch b;
  std::vector<Gen*> in;
  for (Gen* g : gens) {
    if (g->done()) continue;
    if (g->fed < int(g->prompt.size())) {
      const int n = std::min(chunk, int(g->prompt.size()) - g->fed);
      const bool last = g->fed + n == int(g->prompt.size());
      b.entries.push_back({g->seq,
                           std::span<const int32_t>(g->prompt).subspan(size_t(g->fed), size_t(n)),
                           last ? LogitsMode::Last : LogitsMode::None});
    } else {
      g->feed = g->tokens.back();
      b.entries.push_back({g->seq, {&g->feed, 1}, LogitsMode::Last});
    }
    in.push_back(g);
  }
  StepOutput out;
  e.step(b, out);
  for (size_t i = 0; i < in.size(); ++i) {
    Gen& g = *in[i];
    if (g.fed < int(g.prompt.size())) g.fed += int(b.entries[i].tokens.size());
    if (b.entries[i].logits == LogitsMode::None) continue;
    const auto row = out.last(int(i));
    g.logits.insert(g.logits.end(), row.begin(), row.end());
    g.tokens.push_back(argmax(row));
  }
}

Gen greedy(Engine& e, const std::vector<int32_t>& prompt, int chunk, bool attach = false,
           const kv::SeqKeys& keys = {}, int n_gen = kGen) {
  Gen g = start(e, prompt, attach, keys);
  g.n_gen = n_gen;
  while (!g.done()) step(e, {&g}, chunk);
  return g;
}

// Same tokens and the same logit bits at every step.
::testing::AssertionResult same_trace(const Gen& want, const Gen& got, int n_vocab) {
  if (want.logits.size() != got.logits.size() || want.tokens.size() != got.tokens.size()) {
    return ::testing::AssertionFailure() << "trace lengths differ: " << want.tokens.size() << " vs "
                                         << got.tokens.size() << " tokens";
  }
  for (size_t r = 0; r < want.tokens.size(); ++r) {
    const float* a = want.logits.data() + r * size_t(n_vocab);
    const float* b = got.logits.data() + r * size_t(n_vocab);
    if (std::memcmp(a, b, sizeof(float) * size_t(n_vocab)) == 0 && want.tokens[r] == got.tokens[r])
      continue;
    int first = -1;
    float max_diff = 0.0f;
    for (int i = 0; i < n_vocab; ++i) {
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && first < 0) first = i;
      max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    }
    return ::testing::AssertionFailure()
           << "step " << r << ": tokens " << want.tokens[r] << " vs " << got.tokens[r]
           << ", first differing logit " << first << " (" << (first >= 0 ? a[first] : 0.0f)
           << " vs " << (first >= 0 ? b[first] : 0.0f) << "), max |diff| " << max_diff;
  }
  return ::testing::AssertionSuccess();
}

std::unique_ptr<Engine> load(kv::KvType type, size_t dram_mb, const std::string& flash_dir = {},
                             size_t flash_mb = 0) {
  EngineOptions o;
  o.model_path = test::default_model_path();
  o.n_ctx = 1024;
  o.max_seqs = 4;
  o.kv_type = type;
  o.kv_dram_mb = dram_mb;
  o.kv_flash_dir = flash_dir;
  o.kv_flash_mb = flash_mb;
  o.kv_prefetch_layers = 1;
  return Engine::load(o);
}

class KvPaths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::file_exists(test::default_model_path())) return;
    std::ifstream in(test::fixture_path("perplexity_text.txt"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    ids_ = new std::vector<int32_t>(
        plain(kv::KvType::Int8Fp8).tokenizer().encode(ss.str(), false, false));
  }
  static void TearDownTestSuite() {
    refs_.clear();
    for (auto& [t, e] : plain_) delete e;
    plain_.clear();
    delete ids_;
    ids_ = nullptr;
  }
  void SetUp() override {
    if (!ids_) GTEST_SKIP() << "default model not found: " << test::default_model_path();
  }

  // An engine per type with room for everything in DRAM and no flash tier,
  // shared by the tests (tests that must not see each other's cached blocks
  // use their own salt).
  static Engine& plain(kv::KvType t) {
    Engine*& e = plain_[t];
    if (!e) e = load(t, 64).release();
    return *e;
  }
  // n tokens of the fixture text from `from`.
  static std::vector<int32_t> text(size_t from, size_t n) {
    return {ids_->begin() + int64_t(from), ids_->begin() + int64_t(from + n)};
  }
  // Plain, cached, spilled and flash-cached runs of one prompt, all compared
  // with the plain one. spill_dram_mb must hold fewer blocks than a generation.
  static void check_paths(kv::KvType type, size_t spill_dram_mb);

  // The int8-fp8 greedy trace of prompt, alone in a plain engine (memoized).
  static const Gen& reference(const std::vector<int32_t>& prompt) {
    auto it = refs_.find(prompt);
    if (it == refs_.end()) {
      Engine& e = plain(kv::KvType::Int8Fp8);
      it = refs_.emplace(prompt, greedy(e, prompt, int(prompt.size()))).first;
      e.free_sequence(it->second.seq);
    }
    return it->second;
  }

  static std::map<kv::KvType, Engine*> plain_;
  static std::map<std::vector<int32_t>, Gen> refs_;
  static std::vector<int32_t>* ids_;
};
std::map<kv::KvType, Engine*> KvPaths::plain_;
std::map<std::vector<int32_t>, Gen> KvPaths::refs_;
std::vector<int32_t>* KvPaths::ids_ = nullptr;

void KvPaths::check_paths(kv::KvType type, size_t spill_dram_mb) {
  const std::vector<int32_t> prompt = text(0, kPrompt);
  const kv::SeqKeys keys{
      {uint8_t(type), 0x9a}, {}, true};  // this test's own corner of the shared cache
  Engine& e = plain(type);
  const int n_vocab = e.n_vocab();

  // Plain: the whole prompt in one pass, everything in DRAM.
  const int64_t before = e.kv().stats().tokens_reused_dram;
  Gen a = greedy(e, prompt, kPrompt, false, keys);
  // Cached: a second sequence shares a's prompt blocks (a is still live).
  Gen b = greedy(e, prompt, kPrompt, true, keys);
  EXPECT_EQ(b.reused, kReusable);
  EXPECT_EQ(e.kv().stats().tokens_reused_dram - before, kReusable);
  EXPECT_TRUE(same_trace(a, b, n_vocab)) << "cached vs plain";
  e.free_sequence(a.seq);
  e.free_sequence(b.seq);
  e.kv().check_invariants();

  // Spilled: a DRAM budget smaller than the sequence; the prompt goes in in
  // chunks (one pass would need every block at once) and the oldest blocks
  // are spilled, then streamed through staging for every later step.
  TempDir dir("kv-paths-" + std::string(kv::to_string(type)));
  auto s = load(type, spill_dram_mb, dir.path, 16);
  {
    // Staging bounds what can be streamed, and only full blocks spill: the
    // whole prompt at once needs more fresh frames than there are. The step
    // is refused before anything changes.
    Gen whole = start(*s, prompt, false);
    EXPECT_THROW(step(*s, {&whole}, kPrompt), kv::KvFullError);
    EXPECT_EQ(s->seq_len(whole.seq), 0);
    s->free_sequence(whole.seq);
    s->kv().check_invariants();
  }
  Gen c = greedy(*s, prompt, kChunk);
  kv::KvStats st = s->kv().stats();
  ASSERT_LT(st.dram_blocks, (kPrompt + kGen + kBlock - 1) / kBlock)
      << "the DRAM budget holds the whole sequence";
  EXPECT_GT(st.blocks_spilled, 0);
  EXPECT_GT(st.bytes_prefetched, 0);
  EXPECT_EQ(st.read_errors + st.write_errors, 0);
  EXPECT_TRUE(same_trace(a, c, n_vocab)) << "spilled vs plain";
  s->free_sequence(c.seq);  // its spilled blocks stay cached on flash, the rest in DRAM
  s->kv().check_invariants();

  // Cached from flash: the same prompt finds c's blocks again, the spilled
  // ones on flash (the first reloaded into the one free frame, the others
  // streamed), and making room for d's new blocks evicts c's cached DRAM
  // tail to flash.
  Gen d = greedy(*s, prompt, kChunk, true);
  st = s->kv().stats();
  EXPECT_EQ(d.reused, kReusable);
  EXPECT_EQ(st.tokens_reused_dram + st.tokens_reused_flash, kReusable);
  EXPECT_GT(st.tokens_reused_flash, 0);
  EXPECT_GT(st.bytes_reloaded, 0);
  EXPECT_GT(st.blocks_evicted_to_flash, 0);
  EXPECT_EQ(st.read_errors + st.write_errors, 0);
  EXPECT_TRUE(same_trace(a, d, n_vocab)) << "cached from flash vs plain";
  s->free_sequence(d.seq);
  s->kv().check_invariants();
}

TEST_F(KvPaths, F16LogitsBitIdenticalPlainCachedSpilledAndFromFlash) {
  check_paths(kv::KvType::F16, 4);
}
TEST_F(KvPaths, Int8Fp8LogitsBitIdenticalPlainCachedSpilledAndFromFlash) {
  check_paths(kv::KvType::Int8Fp8, 2);
}
TEST_F(KvPaths, Int4Fp8LogitsBitIdenticalPlainCachedSpilledAndFromFlash) {
  check_paths(kv::KvType::Int4Fp8, 2);
}

// attach_prefix() reuses whole blocks up to the first one that differs in any
// token (or in the sequence's keys), never the last prompt token, and the
// continuation after a partial match equals one computed from scratch.
TEST_F(KvPaths, PrefixReuseStopsAtTheFirstDifferingBlock) {
  Engine& e = plain(kv::KvType::Int8Fp8);
  const kv::SeqKeys keys{{0x15, 0x01}, {}, true}, other_keys{{0x15, 0x02}, {}, true};
  const std::vector<int32_t> base = text(0, kPrompt), other = text(1000, kPrompt);
  Gen a = start(e, base, true, keys);
  ASSERT_EQ(a.reused, 0);
  a.n_gen = 1;
  step(e, {&a}, kPrompt);  // commits base's 6 full blocks
  e.free_sequence(a.seq);  // they stay cached
  // base up to `at`, then other's tokens.
  auto splice = [&](size_t at) {
    std::vector<int32_t> p(base.begin(), base.begin() + int64_t(at));
    p.insert(p.end(), other.begin() + int64_t(at), other.end());
    return p;
  };
  const auto attach = [&](const std::vector<int32_t>& p, const kv::SeqKeys& k) {
    const SeqId s = e.new_sequence(k);
    const int n = e.attach_prefix(s, p);
    e.free_sequence(s);
    return n;
  };
  // (first differing token, tokens reused): whole blocks before the one holding it.
  const std::pair<size_t, int> cases[] = {{191, 160}, {160, 160}, {159, 128}, {70, 64}, {64, 64},
                                          {63, 32},   {32, 32},   {31, 0},    {1, 0},   {0, 0}};
  for (const auto& [at, want] : cases) {
    const auto p = splice(at);
    ASSERT_NE(p[at], base[at]);
    EXPECT_EQ(attach(p, keys), want) << "a prompt differing from token " << at;
  }
  EXPECT_EQ(attach(base, keys), kReusable) << "the same prompt: its last token is computed";
  EXPECT_EQ(attach(text(0, 160), keys), 128) << "5 blocks: the last one holds the last token";
  EXPECT_EQ(attach(text(0, 32), keys), 0) << "one block: its last token must be computed";
  EXPECT_EQ(attach(base, other_keys), 0) << "other keys, other KV";

  // The continuation of a prompt sharing 2 blocks and 6 tokens equals its
  // continuation computed with no reuse at all (under keys nobody used).
  const auto p = splice(70);
  const Gen shared = greedy(e, p, kPrompt, true, keys, 8);
  EXPECT_EQ(shared.reused, 64);
  const Gen fresh = greedy(e, p, kPrompt, true, kv::SeqKeys{{0x15, 0x03}, {}, true}, 8);
  EXPECT_EQ(fresh.reused, 0);
  EXPECT_TRUE(same_trace(fresh, shared, e.n_vocab()));
  e.free_sequence(shared.seq);
  e.free_sequence(fresh.seq);
  // Both chains are cached now, each found whole by its own prompt only.
  EXPECT_EQ(attach(base, keys), kReusable);
  EXPECT_EQ(attach(p, keys), kReusable);
  EXPECT_EQ(attach(splice(100), keys), 96) << "3 blocks of base's chain (p's third block differs)";
  e.kv().check_invariants();
}

// Two sequences decode together on a small DRAM budget; only the long one (x)
// has blocks spilled (the spill victim is the sequence with the most full
// DRAM blocks), so a failed flash read fails x alone. y, in the same steps,
// finishes exactly as it would alone in a fault-free engine, and x computed
// again afterwards (its lost block no longer cached) is x's fault-free trace.
TEST_F(KvPaths, FlashReadFaultFailsOnlyTheSequenceStreamingTheBlock) {
  const std::vector<int32_t> xp = text(0, kPrompt), yp = text(1000, 30);
  ASSERT_NE(xp[0], yp[0]);  // nothing shared
  const Gen& rx = reference(xp);
  const Gen& ry = reference(yp);
  TempDir dir("kv-paths-read-fault");
  auto e = load(kv::KvType::Int8Fp8, 3, dir.path, 16);  // 7 frames
  Gen x = start(*e, xp, false), y = start(*e, yp, false);
  while (e->kv().stats().flash_live == 0) {  // until x streams its oldest blocks
    ASSERT_FALSE(x.done()) << "nothing was spilled";
    step(*e, {&x, &y}, kChunk);
  }
  ASSERT_FALSE(y.done());
  e->kv().inject_flash_fault(kv::IoKind::Read, 1, EIO);  // the next read fails
  EXPECT_NO_THROW(step(*e, {&x, &y}, kChunk));
  const std::string why = e->kv().failure(x.seq);
  EXPECT_NE(why.find("KV flash tier: reading"), std::string::npos) << why;
  EXPECT_NE(why.find(std::strerror(EIO)), std::string::npos) << why;
  EXPECT_EQ(e->kv().failure(y.seq), "");
  EXPECT_EQ(e->kv().stats().read_errors, 1);
  // x's KV is incomplete: the engine refuses to extend it, and it ends.
  EXPECT_THROW(step(*e, {&x}, kChunk), kv::KvIoError);
  e->free_sequence(x.seq);
  e->kv().check_invariants();
  while (!y.done()) step(*e, {&y}, kChunk);
  EXPECT_TRUE(same_trace(ry, y, e->n_vocab())) << "y after x failed";
  e->free_sequence(y.seq);

  // x's first block was in the failed read (spills take the oldest blocks):
  // nothing of x is reusable, and computing it again gives the right answer.
  Gen x2 = greedy(*e, xp, kChunk, true);
  EXPECT_EQ(x2.reused, 0);
  EXPECT_TRUE(same_trace(rx, x2, e->n_vocab())) << "x computed again";
  e->free_sequence(x2.seq);
  e->kv().check_invariants();
}

// The first block write fails (disk full) while spilling to make room: that
// step throws KvIoError having changed nothing, no sequence is marked failed,
// and retrying the step finishes both sequences exactly as without the fault.
TEST_F(KvPaths, FlashWriteFaultWhileSpillingFailsOneStepAndCorruptsNothing) {
  const std::vector<int32_t> xp = text(0, kPrompt), yp = text(1000, 30);
  const Gen& rx = reference(xp);
  const Gen& ry = reference(yp);
  TempDir dir("kv-paths-write-fault");
  auto e = load(kv::KvType::Int8Fp8, 3, dir.path, 16);
  e->kv().inject_flash_fault(kv::IoKind::Write, 1, ENOSPC);
  Gen x = start(*e, xp, false), y = start(*e, yp, false);
  int failed_steps = 0;
  while (!x.done() || !y.done()) {
    try {
      step(*e, {&x, &y}, kChunk);
    } catch (const kv::KvIoError& err) {
      ++failed_steps;
      EXPECT_NE(std::string(err.what()).find(std::strerror(ENOSPC)), std::string::npos)
          << err.what();
      EXPECT_EQ(e->kv().failure(x.seq), "");
      EXPECT_EQ(e->kv().failure(y.seq), "");
      e->kv().check_invariants();
      ASSERT_EQ(failed_steps, 1) << "one write was made to fail";
    }
  }
  const kv::KvStats st = e->kv().stats();
  EXPECT_EQ(failed_steps, 1);
  EXPECT_EQ(st.write_errors, 1);
  EXPECT_GT(st.blocks_spilled, 0);
  EXPECT_EQ(st.read_errors, 0);
  EXPECT_TRUE(same_trace(rx, x, e->n_vocab())) << "x";
  EXPECT_TRUE(same_trace(ry, y, e->n_vocab())) << "y";
  e->free_sequence(x.seq);
  e->free_sequence(y.seq);
  e->kv().check_invariants();
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Past one KV segment (512 positions) a decoding token's attention is split
// across workers by segment and merged (split-K), while a prompt's tokens
// attend segment by segment within one task. The two must agree to the bit:
// a generation recomputed as a prompt (after preemption) or a prompt decoded
// token by token gives the same logits as the other way.
TEST_F(KvPaths, SplitDecodeMatchesPrefillBitForBit) {
  Engine& e = plain(kv::KvType::Int8Fp8);
  const kv::SeqKeys keys{{0x51, 0x17}, {}, true};
  ASSERT_GT(700, e.kv().attend_segment_tokens());
  // Decode: 690 prompt tokens, then 10 greedy tokens one step each (split).
  Gen dec = greedy(e, text(0, 690), 128, false, keys, 10);
  // Prefill: the same 690 + the first 9 generated tokens as one prompt, in
  // chunks of 100 (rows of one task cross segment boundaries); its last row
  // must equal the decode's last step.
  std::vector<int32_t> all = text(0, 690);
  all.insert(all.end(), dec.tokens.begin(), dec.tokens.end() - 1);
  Gen pre = greedy(e, all, 100, false, keys, 1);
  const int n_vocab = e.n_vocab();
  ASSERT_EQ(pre.tokens[0], dec.tokens.back());
  EXPECT_EQ(0, std::memcmp(pre.logits.data(), dec.logits.data() + 9 * size_t(n_vocab),
                           sizeof(float) * size_t(n_vocab)));
  // Small chunks past the first segment are split like a decode (a server's
  // chunks deep in a long prompt): 3 tokens a step, the same bits again.
  Gen small = greedy(e, all, 3, false, keys, 1);
  ASSERT_EQ(small.tokens[0], pre.tokens[0]);
  EXPECT_EQ(0,
            std::memcmp(small.logits.data(), pre.logits.data(), sizeof(float) * size_t(n_vocab)));
  e.free_sequence(dec.seq);
  e.free_sequence(pre.seq);
  e.free_sequence(small.seq);
}

}  // namespace
}  // namespace tern
