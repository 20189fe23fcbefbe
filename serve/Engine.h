//===- Engine.h - one served model, stepped on a thread of its own -*- C++
//-*-===//
//
// The device and its Scheduler belong to one thread, which admits new
// requests and cancellations between steps (so a request that arrives
// mid-generation joins the batch at the next step, and a client that
// leaves frees its slot and KV blocks before the next step), steps the
// batch, and hands every token and every ending to the request's sink.
// The HTTP thread only queues: submit() and cancel() take a lock, never
// wait for the device. A probe checks the device every probe interval and
// after each failed step; after `failureLimit` failures in a row the
// engine reports itself unhealthy.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_ENGINE_H
#define KILN_SERVE_ENGINE_H

#include "runtime/PlanDevice.h"
#include "runtime/Scheduler.h"
#include "serve/Metrics.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace kiln::serve {

/// How a request ended.
struct JobEnd {
  absl::Status status; // OK, or why it failed or was cancelled
  int64_t generated = 0;
  bool length = false; // ended at max_tokens (else end-of-sequence)
};

/// Where a request's tokens and end go; called on the engine's thread.
struct JobSink {
  std::function<void(int32_t token)> token;
  std::function<void(const JobEnd &end)> end;
};

struct EngineOptions {
  std::string model;     // the name in metrics and errors
  int64_t maxQueue = 64; // waiting requests; more are refused (429)
  int64_t maxBatch = 0;  // 0: every sequence slot
  std::chrono::milliseconds probeInterval{30000};
  int failureLimit = 5;
  /// Slows each step (tests of the queue and drain guards, on a fast emu
  /// model); 0 in service.
  std::chrono::milliseconds stepDelay{0};
  /// The health probe; unset: the device's own (PlanDevice::probe).
  std::function<absl::StatusOr<PlanDevice::Memory>()> probe;
};

struct Health {
  bool healthy = true;
  std::string why; // the last failure, when unhealthy
};

class Engine {
public:
  Engine(PlanDevice &device, EngineOptions options, Metrics &metrics);
  ~Engine(); // stops the thread; requests still held end cancelled
  Engine(const Engine &) = delete;

  /// Queues a request (any thread); its ticket, or ResourceExhausted when
  /// the queue is full.
  absl::StatusOr<int64_t> submit(Request request, JobSink sink);
  /// Ends a request (any thread): it leaves the queue or the batch before
  /// the next step, with `why`. An ended ticket is ignored.
  void cancel(int64_t ticket, absl::Status why);
  /// Ends every request, queued or running (a drain's deadline).
  void cancelAll(absl::Status why);

  int64_t waiting() const { return waiting_.load(); }
  int64_t running() const { return running_.load(); }
  int64_t capacity() const { return options_.maxQueue; }
  /// Tokens a request may hold, prompt and generation.
  int64_t context() const { return scheduler_.context(); }
  /// Nothing queued, running or still to be told its end.
  bool idle() const { return waiting() == 0 && running() == 0; }
  Health health() const;
  const std::string &model() const { return options_.model; }

private:
  struct Job {
    int64_t ticket;
    Request request;
    JobSink sink;
    std::chrono::steady_clock::time_point arrived, last;
    bool first = true;
    int64_t id = -1; // the scheduler's, once submitted
  };
  void loop();
  void admitInbox(std::vector<std::unique_ptr<Job>> &jobs);
  void finishDone();
  void probe(const absl::Status &stepFailure);
  void publish();

  PlanDevice &device_;
  EngineOptions options_;
  Metrics &metrics_;
  Labels labels_;
  Scheduler scheduler_;
  std::thread thread_;

  // Shared with the HTTP thread, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Job>> inbox_;
  std::vector<std::pair<int64_t, absl::Status>> cancels_;
  bool stop_ = false;
  int64_t nextTicket_ = 0;
  int failures_ = 0;
  std::string lastFailure_;
  // Waiting: submitted, not yet given its first token (or its end).
  std::atomic<int64_t> waiting_{0}, running_{0};

  // The engine thread's own.
  std::map<int64_t, std::unique_ptr<Job>> jobs_; // by ticket
  std::chrono::steady_clock::time_point nextProbe_;
};

} // namespace kiln::serve

#endif // KILN_SERVE_ENGINE_H
