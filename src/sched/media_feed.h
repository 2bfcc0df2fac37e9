#pragma once
// Media in prompts: where their embedding rows come from and which of them a
// step feeds. Private to the scheduler; engine thread only.
//
// A media span (an image's tile, or an audio clip's rows) is a run of prompt positions whose inputs
// are embedding rows instead of token embeddings. Before a prefill chunk reaches a span, the feed
// finds its rows: kept from another span of the same picture, a finished encode the sequence waited
// for, the source's cache, or an encode another prompt started. Otherwise it starts an encode and
// the prompt waits before the span (the text before it may still prefill). Encodes are resumable
// jobs (vision::MediaJob: an image's or a clip's) advanced by time slices between steps, keyed by
// (source, content hash), so a second prompt with the same picture waits on the same encode.
// Sequences hold their waits (shared_ptr); an encode nobody waits for any more is dropped, so
// cancelling one of two waiters keeps it and cancelling the last ends it. A finished encode's rows
// go to the source's store (the embedding cache). A source that cannot
// encode in slices is fetched from at once, blocking, when the step needs
// the rows.
//
// Admission by bytes: a request's rows (each distinct picture: rows x d_model
// x 4 bytes) are reserved in the memory budget when it is admitted (cached
// embeddings, then unreferenced cached KV, give way) and given back once its
// prefill is past its last span.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tern/model/batch.h"
#include "tern/sched/metrics.h"
#include "tern/sched/request.h"
#include "tern/vision/embedding_source.h"

namespace tern {
class MemoryBudget;
class TaskPool;
}  // namespace tern

namespace tern::sched {

class Sequence;

// One picture being encoded, shared by every sequence waiting for it.
struct MediaEncode {
  vision::EmbeddingSource* source = nullptr;
  Sha256Digest hash{};
  uint64_t starter = 0;  // admission order of the sequence that started it (its timings)
  std::unique_ptr<vision::MediaJob> job;           // null once finished
  std::shared_ptr<const vision::Embeddings> rows;  // when done
  std::string error;                               // when it failed
  const char* kind = "image";                      // "image" or "audio", for the log
  double busy_ms = 0;                              // the job's slices, summed

  bool finished() const { return job == nullptr; }
};

// Media whose rows were fetched for a request: from a cache (or an encode
// another request started), and the time spent encoding (the slices of the
// encodes it started, or a blocking fetch).
struct MediaCounts {
  int fetched = 0;
  int cache_hits = 0;
  double fetch_ms = 0;
};

// One sequence's media state, kept on its Sequence and changed only by the
// MediaFeed. Indexed like the request's spans. Its own counts are the
// pictures'; the audio clips' are in `audio`.
struct SeqMedia : MediaCounts {
  explicit SeqMedia(size_t n_spans) : rows(n_spans), waits(n_spans) {}

  // rows[i]: span i's rows while its prefill needs them (spans of one
  // picture share them); null before and after.
  std::vector<std::shared_ptr<const vision::Embeddings>> rows;
  // waits[i]: the encode span i waits for (its prefill pauses before the
  // span), shared with other waiters.
  std::vector<std::shared_ptr<MediaEncode>> waits;
  MediaCounts audio;
  MediaCounts& counts(const vision::MediaSpan& m) { return m.audio ? audio : *this; }
};

class MediaFeed {
 public:
  // Rows are d_model wide; budget may be null (no admission by bytes).
  MediaFeed(int d_model, MemoryBudget* budget, Metrics& metrics)
      : d_model_(d_model), budget_(budget), metrics_(metrics) {}

  // The bytes of r's rows: each distinct picture's, up to the end of its
  // furthest span (spans of one picture share its rows).
  size_t bytes(const Request& r) const;
  // Reserves r's rows' bytes in the memory budget (r.media_charge). False:
  // no room now. `alone` (nothing else runs) admits past the budget rather
  // than wait forever: what holds the room is then a preempted request's.
  bool reserve(Request& r, bool alone);

  // How many of s's next n positions can run now: up to the first span
  // whose rows are not at hand (starting or joining its encode). Throws when
  // the rows cannot be had (a failed encode), with the message for s's error.
  int ready(Sequence& s, int n);
  // A prefill chunk of n positions for s, moved so that it never ends
  // inside a bidirectional span: cut before the span, or (starting in it)
  // run to its end.
  static int fit_chunk(const Sequence& s, int n);
  // Appends to runs the embedding runs of s's positions [in_kv, in_kv + n),
  // fetching (blocking) rows no encode provides. Throws what the source
  // throws, or InvalidArgument when the rows do not fit the span or the model.
  void runs(Sequence& s, int n, std::vector<EmbeddingRun>& runs);
  // After s's KV grew: lets go of rows whose every span is in the KV, and of
  // the budget reservation once all of them are.
  static void release_passed(Sequence& s);

  // Encodes wait to be advanced.
  bool pending() const { return !encodes_.empty(); }
  // Drops the encodes nobody waits for, then advances the rest, oldest
  // first, for about budget_ms (at least one stage); finished ones leave
  // the table with their rows stored.
  void advance(TaskPool& pool, double budget_ms);

 private:
  // Whether span i's rows are at hand (see ready); may start or join an encode.
  bool span_ready(Sequence& s, size_t i);
  std::shared_ptr<MediaEncode> find(const vision::MediaSpan& m) const;
  std::shared_ptr<MediaEncode> start(const vision::MediaSpan& m, uint64_t starter);
  void drop_unwaited();
  // Span i's rows: kept ones, else (blocking) from its source; checked
  // against the span and the model.
  const vision::Embeddings& rows(Sequence& s, size_t i);

  int d_model_;
  MemoryBudget* budget_;
  Metrics& metrics_;
  std::deque<std::shared_ptr<MediaEncode>> encodes_;  // unfinished, oldest first
  double ms_per_gflop_ = 0;                           // carried from job to job
};

}  // namespace tern::sched
