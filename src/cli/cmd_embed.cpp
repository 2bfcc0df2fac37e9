// tern embed: the embedding of each prompt (the final hidden states pooled,
// L2-normalised), as JSON on stdout. The prompts run through the scheduler
// the server drives, so the vectors are the ones /v1/embeddings returns.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "tern/core/error.h"
#include "tern/model/pooling.h"
#include "tern/sched/metrics.h"
#include "tern/sched/scheduler.h"
#include "tern/sched/sync_client.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {

void add_embed_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::vector<std::string> prompts;
    std::string pooling;  // empty: the file's, else mean
    bool no_normalize = false;
    bool tokens = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("embed", "print the embedding of each prompt as JSON");
  cmd->add_option("-p,--prompt", o->prompts,
                  "text to embed (repeatable); the vocabulary's BOS/EOS are added as "
                  "llama-embedding adds them")
      ->required();
  cmd->add_option("--pooling", o->pooling,
                  "mean, cls (first token) or last; default: the file's pooling_type, else mean")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  cmd->add_flag("--no-normalize", o->no_normalize, "print the pooled vectors as they are");
  cmd->add_flag("--tokens", o->tokens, "print each prompt's token ids too");
  o->model.add(*cmd);
  cmd->callback([o] {
    auto engine = load_engine(o->model, 1);
    const Pooling pooling = resolve_pooling(
        engine->config().pooling, o->pooling.empty() ? std::nullopt : parse_pooling(o->pooling));
    if (pooling == Pooling::Rank)
      throw InvalidArgument(
          "this model is a reranker (pooling_type rank): rank with tern serve's POST /v1/rerank, "
          "or pass --pooling mean, cls or last to embed with it");
    sched::Metrics metrics;
    sched::Scheduler scheduler(*engine, sched::SchedulerOptions{}, metrics);
    scheduler.start();
    sched::SyncClient client(scheduler);
    nlohmann::json data = nlohmann::json::array();
    int n = 0;
    for (const std::string& text : o->prompts) {
      sched::Request r;
      r.id = "embed-" + std::to_string(n);
      r.prompt = engine->tokenizer().encode(text, /*add_bos=*/true, /*parse_special=*/true);
      r.pooling = pooling;
      const std::vector<int32_t> ids = r.prompt;
      const sched::Finish f = client.run(std::move(r), {});
      if (f.reason != sched::FinishReason::Stop)
        throw Error("prompt " + std::to_string(n) + ": " + f.error);
      nlohmann::json item{{"index", n},
                          {"embedding", finish_embedding(f.embedding, 0, !o->no_normalize)}};
      if (o->tokens) item["tokens"] = ids;
      data.push_back(std::move(item));
      ++n;
    }
    const nlohmann::json out{{"model", engine->config().name},
                             {"pooling", to_string(pooling)},
                             {"normalize", !o->no_normalize},
                             {"n_embd", engine->config().d_model},
                             {"data", std::move(data)}};
    std::printf("%s\n", out.dump().c_str());
  });
}

}  // namespace tern::cli
