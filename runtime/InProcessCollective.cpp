//===- InProcessCollective.cpp --------------------------------------------===//
#include "runtime/InProcessCollective.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>

#include <cstring>

namespace kiln {

InProcessCollective::InProcessCollective(int ranks,
                                         std::chrono::milliseconds timeout)
    : ranks_(ranks), timeout_(timeout), here_(ranks, false),
      inputs_(ranks, nullptr) {}

absl::Status InProcessCollective::barrier(int rank, const char *what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!failed_.ok())
    return failed_;
  int64_t generation = generation_;
  here_[rank] = true;
  if (std::count(here_.begin(), here_.end(), true) == ranks_) {
    std::fill(here_.begin(), here_.end(), false);
    ++generation_;
    arrived_.notify_all();
    return absl::OkStatus();
  }
  if (arrived_.wait_for(lock, timeout_, [&] {
        return generation_ != generation || !failed_.ok();
      }))
    return failed_;
  std::vector<int> missing;
  for (int r = 0; r < ranks_; ++r)
    if (!here_[r])
      missing.push_back(r);
  failed_ = absl::DeadlineExceededError(absl::StrCat(
      what, " #", collectives_, ": rank ", rank, " waited ", timeout_.count(),
      " ms for rank", missing.size() > 1 ? "s " : " ",
      absl::StrJoin(missing, ", "),
      " (a rank that died, or ranks that run different plans)"));
  arrived_.notify_all();
  return failed_;
}

void InProcessCollective::abort(int rank, const absl::Status &why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.ok())
    failed_ = absl::Status(why.code(),
                           absl::StrCat("rank ", rank, ": ", why.message()));
  arrived_.notify_all();
}

absl::Status InProcessCollective::allReduce(int rank, const uint16_t *input,
                                            const uint16_t *residual,
                                            uint16_t *out, int64_t count) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inputs_[rank] = input;
  }
  if (absl::Status s = barrier(rank, "all-reduce"); !s.ok())
    return s;
  // Every rank sums every input in rank order: the same bits everywhere.
  std::vector<uint16_t> sum(count); // [count]
  std::vector<const uint16_t *> inputs;
  for (const void *in : inputs_)
    inputs.push_back(static_cast<const uint16_t *>(in));
  sumInRankOrder(inputs, residual, sum.data(), count);
  // Nobody writes over an input another rank may still be reading.
  if (absl::Status s = barrier(rank, "all-reduce"); !s.ok())
    return s;
  std::memcpy(out, sum.data(), count * sizeof(uint16_t));
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++collectives_;
  }
  return absl::OkStatus();
}

absl::Status InProcessCollective::allGather(int rank, const float *input,
                                            float *out, int64_t rows,
                                            int64_t cols) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inputs_[rank] = input;
  }
  if (absl::Status s = barrier(rank, "all-gather"); !s.ok())
    return s;
  std::vector<float> whole(rows * ranks_ * cols); // [rows, ranks * cols]
  std::vector<const float *> inputs;
  for (const void *in : inputs_)
    inputs.push_back(static_cast<const float *>(in));
  gatherColumns(inputs, whole.data(), rows, cols);
  if (absl::Status s = barrier(rank, "all-gather"); !s.ok())
    return s;
  std::memcpy(out, whole.data(), whole.size() * sizeof(float));
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++collectives_;
  }
  return absl::OkStatus();
}

} // namespace kiln
