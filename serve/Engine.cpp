//===- Engine.cpp ---------------------------------------------------------===//
#include "serve/Engine.h"

#include "absl/strings/str_cat.h"

namespace kiln::serve {
namespace {
using Clock = std::chrono::steady_clock;
constexpr int64_t kAll = -1; // a cancel of every request
} // namespace

Engine::Engine(PlanDevice &device, EngineOptions options, Metrics &metrics)
    : device_(device), options_(std::move(options)), metrics_(metrics),
      labels_({{"model", options_.model}}),
      // No logits on the host: the device samples, and a server's
      // requests would carry [tokens, vocab] floats each.
      scheduler_(device, {options_.maxBatch, /*keepLogits=*/false}) {
  metrics_.set("kiln_kv_blocks_total", labels_,
               double(scheduler_.poolBlocks()));
  metrics_.set("kiln_device_healthy", labels_, 1);
  publish();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

absl::StatusOr<int64_t> Engine::submit(Request request, JobSink sink) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (waiting_.load() >= options_.maxQueue)
    return absl::ResourceExhaustedError(
        absl::StrCat("the queue of model '", options_.model, "' is full (",
                     options_.maxQueue, " requests waiting)"));
  auto job = std::make_unique<Job>();
  job->ticket = nextTicket_++;
  job->request = std::move(request);
  job->sink = std::move(sink);
  job->arrived = Clock::now();
  int64_t ticket = job->ticket;
  inbox_.push_back(std::move(job));
  ++waiting_;
  wake_.notify_all();
  return ticket;
}

void Engine::cancel(int64_t ticket, absl::Status why) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancels_.push_back({ticket, std::move(why)});
  wake_.notify_all();
}

void Engine::cancelAll(absl::Status why) { cancel(kAll, std::move(why)); }

Health Engine::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failures_ < options_.failureLimit)
    return {true, ""};
  return {false,
          absl::StrCat(lastFailure_, " (", failures_, " failures in a row)")};
}

void Engine::admitInbox(std::vector<std::unique_ptr<Job>> &arrived) {
  for (std::unique_ptr<Job> &owned : arrived) {
    Job *job = owned.get();
    job->request.hooks.onToken = [this, job](int32_t token) {
      auto now = Clock::now();
      metrics_.observe(job->first ? "kiln_time_to_first_token_seconds"
                                  : "kiln_inter_token_latency_seconds",
                       labels_,
                       std::chrono::duration<double>(
                           now - (job->first ? job->arrived : job->last))
                           .count());
      if (job->first) // admitted and prefilled: no longer waiting
        --waiting_;
      job->first = false;
      job->last = now;
      job->sink.token(token);
      return true;
    };
    int64_t prompt = int64_t(job->request.prompt.size());
    auto id = scheduler_.submit(std::move(job->request));
    if (!id.ok()) {
      --waiting_;
      job->sink.end({id.status()});
      continue;
    }
    metrics_.add("kiln_prompt_tokens_total", labels_, double(prompt));
    job->id = *id;
    jobs_[job->ticket] = std::move(owned);
  }
  arrived.clear();
}

void Engine::finishDone() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job &job = *it->second;
    if (!scheduler_.completion(job.id).done) {
      ++it;
      continue;
    }
    Completion c = scheduler_.take(job.id);
    if (job.first) // ended without a token (refused, cancelled in the queue)
      --waiting_;
    JobEnd end{c.status, int64_t(c.generation.tokens.size())};
    end.length = c.status.ok() && end.generated >= job.request.maxNewTokens;
    const char *how =
        !c.status.ok() ? (absl::IsCancelled(c.status) ? "cancelled" : "error")
        : end.length   ? "length"
                       : "stop";
    metrics_.add("kiln_requests_total",
                 {{"model", options_.model}, {"finish", how}});
    metrics_.add("kiln_generation_tokens_total", labels_,
                 double(end.generated));
    job.sink.end(end);
    it = jobs_.erase(it);
  }
}

void Engine::probe(const absl::Status &stepFailure) {
  nextProbe_ = Clock::now() + options_.probeInterval;
  auto memory = options_.probe ? options_.probe() : device_.probe();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const absl::Status *s : {&stepFailure, &memory.status()}) {
    if (s->ok())
      continue;
    ++failures_;
    lastFailure_ = absl::StrCat(s == &stepFailure ? "a step failed: "
                                                  : "the probe failed: ",
                                s->message());
    metrics_.add("kiln_device_failures_total", labels_);
  }
  if (memory.ok()) {
    if (stepFailure.ok())
      failures_ = 0;
    if (memory->freeBytes >= 0)
      metrics_.set("kiln_device_memory_free_bytes", labels_,
                   double(memory->freeBytes));
  }
  metrics_.set("kiln_device_healthy", labels_,
               failures_ < options_.failureLimit);
}

void Engine::publish() {
  running_ = scheduler_.running();
  metrics_.set("kiln_requests_waiting", labels_, double(waiting_.load()));
  metrics_.set("kiln_requests_running", labels_, double(running_.load()));
  metrics_.set("kiln_kv_blocks_used", labels_, double(scheduler_.usedBlocks()));
}

void Engine::loop() {
  if (absl::Status s = device_.bindThread(); !s.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_ = options_.failureLimit;
    lastFailure_ = absl::StrCat("the device: ", s.message());
  }
  nextProbe_ = Clock::now() + options_.probeInterval;
  std::vector<std::unique_ptr<Job>> arrived;
  std::vector<std::pair<int64_t, absl::Status>> cancels;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_until(lock, nextProbe_, [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() ||
               !scheduler_.idle();
      });
      if (stop_)
        break;
      arrived.swap(inbox_);
      cancels.swap(cancels_);
    }
    admitInbox(arrived);
    for (auto &[ticket, why] : cancels) {
      if (ticket == kAll) {
        for (auto &[t, job] : jobs_)
          scheduler_.cancel(job->id, why);
      } else if (auto it = jobs_.find(ticket); it != jobs_.end()) {
        scheduler_.cancel(it->second->id, why);
      }
    }
    cancels.clear();
    if (!scheduler_.idle()) {
      if (absl::Status s = scheduler_.step(); !s.ok()) {
        // The running sequences' caches are lost with the step.
        scheduler_.abortRunning(s);
        probe(s);
      } else {
        std::lock_guard<std::mutex> lock(mutex_);
        if (failures_ < options_.failureLimit)
          failures_ = 0;
      }
    }
    // The gauges first: a client told of its end finds them already
    // without its sequence and blocks.
    publish();
    finishDone();
    if (options_.stepDelay.count() > 0 && !scheduler_.idle())
      std::this_thread::sleep_for(options_.stepDelay);
    if (Clock::now() >= nextProbe_)
      probe(absl::OkStatus());
  }
  // Stopped: whatever is still held ends now.
  absl::Status stopped = absl::CancelledError("the server stopped");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::unique_ptr<Job> &job : inbox_)
      job->sink.end({stopped});
  }
  for (auto &[ticket, job] : jobs_)
    job->sink.end({stopped});
  waiting_ = 0;
  running_ = 0;
}

} // namespace kiln::serve
