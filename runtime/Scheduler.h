//===- Scheduler.h - continuous batching over the paged KV pool -*- C++ -*-===//
//
// Requests wait in a queue; each step admits the ones that fit (a free
// sequence slot, and KV blocks for the prompt), prefills each alone (the
// sequence-length bucket that holds it), then decodes one token of every
// running sequence in one batched step (the decode plan for one, else the
// batch-size bucket that holds them). A sequence that ends (max_new_tokens,
// a stop token, its hook) gives back its slot and blocks at once, so a
// waiting request joins the running batch at the next step: continuous
// batching. A request the pool cannot hold fails alone, with the reason;
// the others go on.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SCHEDULER_H
#define KILN_RUNTIME_SCHEDULER_H

#include "runtime/Generate.h"
#include "runtime/KVBlockAllocator.h"
#include "runtime/PlanDevice.h"

#include <deque>
#include <unordered_map>

namespace kiln {

/// A prompt and how to continue it.
struct Request {
  std::vector<int32_t> prompt;
  int64_t maxNewTokens = 16;
  SamplingParams sampling;
  LogitBias logitBias; // added to its logits at every step
  GenerateHooks hooks;

  /// How step `step` of it samples: `sampling` at that step, `biased`
  /// when it has a logit bias.
  SamplingParams samplingAt(uint32_t step) const {
    SamplingParams p = sampling;
    p.step = step;
    p.biased = logitBias.empty() ? 0 : 1;
    return p;
  }
};

/// How a request ended: its generation (the logits too when the scheduler
/// keeps them), or why it failed.
struct Completion {
  Generation generation;
  absl::Status status;
  bool done = false;
};

struct SchedulerOptions {
  /// Sequences decoded at once: 0 for as many as the device has slots.
  int64_t maxBatch = 0;
  /// Copy every step's logits to the host: kept in each Generation, and
  /// every draw of the device checked against them (runtime/Sampling.h).
  /// Off for benchmarks, where the copy would cost more than the check
  /// tells.
  bool keepLogits = true;
};

/// What a run did, for the report and the benchmarks.
struct SchedulerStats {
  int64_t steps = 0;     // batched decode steps
  int64_t rows = 0;      // sequences decoded, summed over the steps
  int64_t peakBatch = 0; // most sequences in one step
  int64_t newTokens = 0; // tokens generated, all requests
  double prefillSeconds = 0, decodeSeconds = 0;
};

class Scheduler {
public:
  Scheduler(PlanDevice &device, SchedulerOptions options);

  /// Queues a request (checked against the vocabulary and the context);
  /// returns its id, the index of its completion.
  absl::StatusOr<int64_t> submit(Request request);
  /// Admits what fits, then decodes one token of every running sequence.
  /// Fails only when the device does; a request's own fault ends it alone.
  absl::Status step();
  /// Steps until every request has completed.
  absl::Status run();
  bool idle() const { return waiting_.empty() && running_.empty(); }

  /// Ends request `id` now with `why` (a client that left): a waiting one
  /// leaves the queue, a running one the batch, its slot and KV blocks
  /// free at once. False when it had already completed.
  bool cancel(int64_t id, absl::Status why);
  /// Ends every running request with `why` (the device failed a step:
  /// their caches are lost); waiting ones stay queued.
  void abortRunning(const absl::Status &why);

  const Completion &completion(int64_t id) const {
    return entries_.at(id).completion;
  }
  /// The completion of a completed request, which the scheduler then
  /// forgets (a server's requests would otherwise pile up).
  Completion take(int64_t id);
  /// Requests submitted so far: ids are 0 .. requests() - 1.
  int64_t requests() const { return nextId_; }
  /// Tokens a sequence may hold, prompt and generation.
  int64_t context() const { return context_; }
  int64_t waiting() const { return int64_t(waiting_.size()); }
  int64_t running() const { return int64_t(running_.size()); }
  /// The KV pool: blocks a sequence holds, and all of them.
  int64_t usedBlocks() const { return poolBlocks_ - blocks_.freeBlocks(); }
  int64_t poolBlocks() const { return poolBlocks_; }
  const SchedulerStats &stats() const { return stats_; }

private:
  /// A sequence in the running batch.
  struct Running {
    int64_t id;
    int32_t slot;
    int32_t next;              // sampled, not yet accepted
    std::vector<int32_t> seen; // [V]: the host's count, to check draws
    int64_t tableSent;         // blocks of its table the device has
  };
  absl::Status admit();
  /// Accepts each running sequence's sampled token (or ends it); returns
  /// the rows of the next step.
  std::vector<BatchRow> accept();
  /// Whether the device's draw `token` follows the rule on `logits`.
  absl::Status check(Running &r, const float *logits, int32_t token);
  void finish(size_t index, absl::Status status = absl::OkStatus());

  /// A request and how it ended, by id.
  struct Entry {
    Request request;
    Completion completion;
  };
  PlanDevice &device_;
  SchedulerOptions options_;
  int64_t vocab_, context_, poolBlocks_;
  KVBlockAllocator blocks_;
  std::unordered_map<int64_t, Entry> entries_;
  int64_t nextId_ = 0;
  std::deque<int64_t> waiting_;
  std::vector<Running> running_;
  std::vector<int32_t> freeSlots_; // a stack: the lowest slot comes out first
  SchedulerStats stats_;
};

} // namespace kiln

#endif // KILN_RUNTIME_SCHEDULER_H
