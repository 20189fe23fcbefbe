//===- Scheduler.cpp ------------------------------------------------------===//
#include "runtime/Scheduler.h"

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"

#include <chrono>

namespace kiln {

Scheduler::Scheduler(PlanDevice &device, SchedulerOptions options)
    : device_(device), options_(options), vocab_(device.program().vocab),
      context_(
          std::min(device.program().maxPositions,
                   device.program().tableBlocks * device.program().blockSize)),
      poolBlocks_(device.program().poolBlocks),
      blocks_(device.program().poolBlocks, device.program().blockSize) {
  int64_t slots = device.sequences();
  if (options_.maxBatch <= 0 || options_.maxBatch > slots)
    options_.maxBatch = slots;
  for (int64_t s = slots - 1; s >= 0; --s)
    freeSlots_.push_back(int32_t(s));
}

absl::StatusOr<int64_t> Scheduler::submit(Request request) {
  if (absl::Status s = checkPrompt(request.prompt, request.maxNewTokens, vocab_,
                                   device_.program().maxPositions);
      !s.ok())
    return s;
  if (int64_t(request.prompt.size()) + request.maxNewTokens > context_)
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompt-ids: the prompt (", request.prompt.size(), " tokens) plus ",
        request.maxNewTokens, " new tokens exceeds the ", context_,
        " tokens a sequence may hold (compiled with --max-context)"));
  int64_t id = nextId_++;
  Entry &e = entries_[id];
  e.request = std::move(request);
  e.completion.generation.vocab = vocab_;
  e.completion.generation.prompt = e.request.prompt;
  waiting_.push_back(id);
  return id;
}

bool Scheduler::cancel(int64_t id, absl::Status why) {
  if (auto w = absl::c_find(waiting_, id); w != waiting_.end()) {
    waiting_.erase(w);
    Completion &c = entries_.at(id).completion;
    c.status = std::move(why);
    c.done = true;
    return true;
  }
  for (size_t i = 0; i < running_.size(); ++i)
    if (running_[i].id == id) {
      finish(i, std::move(why));
      return true;
    }
  return false;
}

void Scheduler::abortRunning(const absl::Status &why) {
  while (!running_.empty())
    finish(running_.size() - 1, why);
}

Completion Scheduler::take(int64_t id) {
  auto it = entries_.find(id);
  Completion c = std::move(it->second.completion);
  entries_.erase(it);
  return c;
}

absl::Status Scheduler::check(Running &r, const float *logits, int32_t token) {
  if (!options_.keepLogits)
    return absl::OkStatus();
  const Entry &e = entries_.at(r.id);
  const Request &req = e.request;
  SamplingParams params =
      req.samplingAt(uint32_t(e.completion.generation.tokens.size()));
  if (absl::Status s = checkSampled(logits, vocab_, params, token,
                                    r.seen.data(), req.logitBias);
      !s.ok())
    return absl::InternalError(absl::StrCat(device_.name(), " device: request ",
                                            r.id, " step ", params.step, ": ",
                                            s.message()));
  return absl::OkStatus();
}

void Scheduler::finish(size_t index, absl::Status status) {
  Running &r = running_[index];
  Completion &c = entries_.at(r.id).completion;
  c.status = std::move(status);
  c.done = true;
  blocks_.release(r.id);
  freeSlots_.push_back(r.slot);
  running_.erase(running_.begin() + ptrdiff_t(index));
}

absl::Status Scheduler::admit() {
  while (!waiting_.empty() && int64_t(running_.size()) < options_.maxBatch &&
         !freeSlots_.empty()) {
    int64_t id = waiting_.front();
    const Request &req = entries_.at(id).request;
    Completion &c = entries_.at(id).completion;
    // Blocks for the prompt now; the decode steps take more as they go.
    if (absl::Status s = blocks_.reserve(id, int64_t(req.prompt.size()));
        !s.ok()) {
      blocks_.release(id);
      if (!running_.empty())
        return absl::OkStatus(); // it waits for blocks to come back
      // Nothing runs that could give blocks back: it can never fit.
      waiting_.pop_front();
      c.status = absl::ResourceExhaustedError(
          absl::StrCat("request ", id, ": ", s.message()));
      c.done = true;
      continue;
    }
    waiting_.pop_front();
    int32_t slot = freeSlots_.back();
    freeSlots_.pop_back();
    running_.push_back({id, slot, 0, {}, 0});
    Running &r = running_.back();
    if (options_.keepLogits) {
      r.seen.assign(vocab_, 0);
      for (int32_t t : req.prompt)
        ++r.seen[t];
    }
    if (absl::Status s = device_.setTable(slot, blocks_.blockTable(id));
        !s.ok())
      return s;
    r.tableSent = int64_t(blocks_.blockTable(id).size());
    if (absl::Status s = device_.setLogitBias(slot, req.logitBias); !s.ok())
      return s;
    // Step s of a request draws with (seed, s).
    SamplingParams params = req.samplingAt(0);
    auto start = std::chrono::steady_clock::now();
    auto out = device_.prefillSequence(slot, req.prompt, 0, params,
                                       options_.keepLogits);
    if (!out.ok())
      return out.status();
    c.generation.prefillSeconds = secondsSince(start);
    stats_.prefillSeconds += c.generation.prefillSeconds;
    c.generation.prefillLogits = std::move(out->logits);
    r.next = out->sampled[0];
    if (options_.keepLogits)
      if (absl::Status s = check(
              r, &c.generation.prefillLogits[(req.prompt.size() - 1) * vocab_],
              r.next);
          !s.ok())
        return s;
  }
  return absl::OkStatus();
}

std::vector<BatchRow> Scheduler::accept() {
  std::vector<BatchRow> rows;
  for (size_t i = 0; i < running_.size();) {
    Running &r = running_[i];
    const Request &req = entries_.at(r.id).request;
    Generation &g = entries_.at(r.id).completion.generation;
    // As generate() does: a stop token ends it unkept; max_new_tokens
    // ends it; a hook that says stop ends it after the token.
    if (int64_t(g.tokens.size()) >= req.maxNewTokens ||
        absl::c_linear_search(req.hooks.stopTokens, r.next)) {
      finish(i);
      continue;
    }
    g.tokens.push_back(r.next);
    ++stats_.newTokens;
    if (req.hooks.onToken && !req.hooks.onToken(r.next)) {
      finish(i);
      continue;
    }
    // The fed token's slot: one more block when it starts a new one.
    int32_t position = int32_t(req.prompt.size() + g.tokens.size() - 1);
    if (absl::Status s = blocks_.reserve(r.id, position + 1); !s.ok()) {
      finish(i, absl::ResourceExhaustedError(
                    absl::StrCat("request ", r.id, ": ", s.message())));
      continue;
    }
    if (const auto &table = blocks_.blockTable(r.id);
        int64_t(table.size()) != r.tableSent) { // a new block: every 16 tokens
      if (absl::Status s = device_.setTable(r.slot, table); !s.ok()) {
        finish(i, s);
        continue;
      }
      r.tableSent = int64_t(table.size());
    }
    if (options_.keepLogits)
      ++r.seen[r.next];
    rows.push_back(
        {r.slot, r.next, position, req.samplingAt(uint32_t(g.tokens.size()))});
    ++i;
  }
  return rows;
}

absl::Status Scheduler::step() {
  if (absl::Status s = admit(); !s.ok())
    return s;
  std::vector<BatchRow> rows = accept();
  if (rows.empty())
    return absl::OkStatus();
  auto start = std::chrono::steady_clock::now();
  auto out = device_.decodeBatch(rows, options_.keepLogits);
  if (!out.ok())
    return out.status();
  double seconds = secondsSince(start);
  ++stats_.steps;
  stats_.rows += int64_t(rows.size());
  stats_.peakBatch = std::max(stats_.peakBatch, int64_t(rows.size()));
  stats_.decodeSeconds += seconds;
  // accept() kept the running sequences in the order of the rows.
  for (size_t i = 0; i < running_.size(); ++i) {
    Running &r = running_[i];
    Generation &g = entries_.at(r.id).completion.generation;
    g.decodeSeconds += seconds;
    r.next = out->sampled[i];
    if (!options_.keepLogits)
      continue;
    const float *row = &out->logits[i * vocab_];
    g.decodeLogits.insert(g.decodeLogits.end(), row, row + vocab_);
    if (absl::Status s = check(r, row, r.next); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

absl::Status Scheduler::run() {
  while (!idle())
    if (absl::Status s = step(); !s.ok())
      return s;
  return absl::OkStatus();
}

} // namespace kiln
