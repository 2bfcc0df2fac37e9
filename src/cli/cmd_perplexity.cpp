// tern perplexity: perplexity of a text file, computed like llama.cpp's
// `llama-perplexity`: the tokens are cut into chunks of CTX; each chunk is
// evaluated from an empty cache and only its second half is scored (each
// scored token has at least CTX/2 tokens of context).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {
namespace {

// -log softmax(logits)[target], in double.
double nll(std::span<const float> logits, int32_t target) {
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(double(v) - mx);
  return std::log(sum) - (double(logits[size_t(target)]) - mx);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::string file;
    int batch = 512;
  };
  auto o = std::make_shared<Opts>();
  o->model.ctx = 512;
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file");
  cmd->add_option("-f,--file", o->file, "text file")->required();
  cmd->add_option("-b,--batch", o->batch, "tokens per forward pass")->check(CLI::Range(1, 8192));
  o->model.add(*cmd);
  cmd->callback([o] {
    std::ifstream in(o->file, std::ios::binary);
    if (!in) throw IoError(o->file + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    auto engine = load_engine(o->model, 1);
    const Tokenizer& tok = engine->tokenizer();
    const auto ids = tok.encode(ss.str(), tok.add_bos_default(), false);
    const int ctx = engine->n_ctx();
    const int n_chunks = int(ids.size()) / ctx;
    if (n_chunks < 1) {
      throw InvalidArgument(o->file + ": " + std::to_string(ids.size()) +
                            " tokens is shorter than one context of " + std::to_string(ctx));
    }
    std::fprintf(stderr, "%zu tokens, %d chunks of %d\n", ids.size(), n_chunks, ctx);
    const int first = ctx / 2;
    double total_nll = 0.0;
    int64_t count = 0;
    StepOutput out;
    std::vector<int32_t> chunk(static_cast<size_t>(ctx));
    for (int c = 0; c < n_chunks; ++c) {
      std::copy_n(ids.begin() + int64_t(c) * ctx, ctx, chunk.begin());
      if (tok.add_bos_default()) chunk[0] = tok.bos();
      const SeqId seq = engine->new_sequence();
      for (int b = 0; b < ctx; b += o->batch) {
        const int n = std::min(o->batch, ctx - b);
        Batch batch;
        batch.entries.push_back(
            {seq, std::span<const int32_t>(chunk).subspan(size_t(b), size_t(n)), LogitsMode::All});
        engine->step(batch, out);
        // Row j of this pass predicts token b+j+1; score positions first .. ctx-2.
        for (int j = 0; j < n; ++j) {
          const int pos = b + j;
          if (pos < first || pos >= ctx - 1) continue;
          total_nll += nll(out.row(j), chunk[size_t(pos + 1)]);
          ++count;
        }
      }
      engine->free_sequence(seq);
      std::fprintf(stderr, "[%d] %.4f\n", c + 1, std::exp(total_nll / double(count)));
    }
    std::printf("perplexity: %.4f\n", std::exp(total_nll / double(count)));
  });
}

}  // namespace tern::cli
