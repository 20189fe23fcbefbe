//===- TensorParallelDevice.cpp -------------------------------------------===//
#include "runtime/TensorParallelDevice.h"

#include "runtime/EmuDevice.h"
#include "runtime/InProcessCollective.h"
#include "runtime/RemoteRank.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <thread>

namespace kiln {

TensorParallelDevice::TensorParallelDevice(
    std::vector<std::unique_ptr<PlanDevice>> ranks,
    std::unique_ptr<RankAbort> collective, std::unique_ptr<RankLinks> links)
    : PlanDevice(ranks.front()->program()), links_(std::move(links)),
      collective_(std::move(collective)), ranks_(std::move(ranks)) {}

TensorParallelDevice::~TensorParallelDevice() {
  // Ranks in other processes are told how the run ended as they go.
  for (auto &r : ranks_)
    if (auto *remote = dynamic_cast<RemoteRank *>(r.get()))
      remote->setFailure(failure_);
}

std::string TensorParallelDevice::name() const {
  return absl::StrCat(ranks_[0]->name(), " x", ranks_.size());
}

void TensorParallelDevice::stage() {
  for (auto &r : ranks_) {
    PlanDevice &d = *r;
    d.tokens_ = tokens_;
    d.positions_ = positions_;
    d.rowSeqs_ = rowSeqs_;
    d.count_ = count_;
    d.sampling_ = sampling_;
    d.everyLogit_ = everyLogit_;
  }
}

absl::Status TensorParallelDevice::onRanks(
    const std::function<absl::Status(PlanDevice &)> &call) {
  std::vector<absl::Status> status(ranks_.size());
  auto one = [&](size_t r) {
    status[r] = ranks_[r]->bindThread();
    if (status[r].ok())
      status[r] = call(*ranks_[r]);
    if (!status[r].ok()) // the others stop at their next collective
      collective_->abort(int(r), status[r]);
  };
  std::vector<std::thread> threads;
  for (size_t r = 1; r < ranks_.size(); ++r)
    threads.emplace_back(one, r);
  one(0);
  for (std::thread &t : threads)
    t.join();
  // The rank that failed first says why; the others say it failed.
  absl::Status first;
  for (const absl::Status &s : status)
    if (!s.ok() && first.ok() && !absl::StrContains(s.message(), "rank "))
      first = s;
  for (const absl::Status &s : status)
    if (!s.ok() && first.ok())
      first = s;
  if (!first.ok() && failure_.ok())
    failure_ = first;
  return first;
}

absl::Status TensorParallelDevice::sendInputs(int64_t rows) {
  stage();
  return onRanks([&](PlanDevice &d) { return d.sendInputs(rows); });
}

absl::Status TensorParallelDevice::sendTables() {
  for (auto &r : ranks_)
    r->tables_ = tables_;
  return onRanks([](PlanDevice &d) { return d.sendTables(); });
}

absl::Status TensorParallelDevice::sendLogitBias(int32_t seq) {
  // The slot's row only ([vocab] of [sequences, vocab]).
  const int64_t v = program_.vocab;
  for (auto &r : ranks_)
    std::copy_n(logitBias_.begin() + seq * v, v,
                r->logitBias_.begin() + seq * v);
  return onRanks([&](PlanDevice &d) { return d.sendLogitBias(seq); });
}

absl::Status TensorParallelDevice::run(const std::vector<Launch> &launches) {
  stage();
  // Every rank's Program is this one: the same plans, their own weights.
  // Each runs its own copy's plan (the cuda device keys its graphs by it).
  std::optional<PlanRef> ref = program_.refOf(launches);
  if (!ref)
    return absl::InternalError("tensor parallelism: a plan of no Program");
  // --profile times rank 0's launches: the step's, collectives included.
  ranks_[0]->timing_ = timing_;
  return onRanks([&](PlanDevice &d) { return d.run(*d.program().plan(*ref)); });
}

absl::Status TensorParallelDevice::clearHistory(int32_t seq) {
  return onRanks([&](PlanDevice &d) { return d.clearHistory(seq); });
}

absl::Status TensorParallelDevice::readLogits(int64_t offset, float *out,
                                              size_t floats) {
  return ranks_[0]->readLogits(offset, out, floats);
}

absl::StatusOr<std::unique_ptr<TensorParallelDevice>>
openEmuRanks(const Program &program, const WeightSet *checkpoint,
             std::chrono::milliseconds timeout) {
  const int ranks = int(program.ranks);
  auto collective = std::make_unique<InProcessCollective>(ranks, timeout);
  std::vector<std::unique_ptr<PlanDevice>> devices;
  for (int r = 0; r < ranks; ++r) {
    auto rank = EmuDevice::create(
        program, checkpoint ? WeightProvider::checkpoint(*checkpoint, r, ranks)
                            : WeightProvider::random(1 + r));
    if (!rank.ok())
      return rank.status();
    (*rank)->joinCollective(collective.get(), r);
    devices.push_back(std::move(*rank));
  }
  return std::make_unique<TensorParallelDevice>(std::move(devices),
                                                std::move(collective));
}

absl::Status TensorParallelDevice::readSampled(int64_t rows) {
  if (absl::Status s = ranks_[0]->readSampled(rows); !s.ok())
    return s;
  sampled_ = ranks_[0]->sampled_;
  return absl::OkStatus();
}

} // namespace kiln
