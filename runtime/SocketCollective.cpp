//===- SocketCollective.cpp -----------------------------------------------===//
#include "runtime/SocketCollective.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <cstring>

namespace kiln {

SocketCollective::SocketCollective(RankLinks &links,
                                   std::chrono::milliseconds timeout)
    : links_(links), timeout_(timeout) {}

absl::Status SocketCollective::fail(absl::Status why) {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.ok())
      failure_ = why;
    why = failure_;
    if (failed_.exchange(true))
      return why; // the others were told
    message = std::string(why.message());
  }
  if (links_.rank == 0) {
    for (int r = 1; r < links_.worldSize; ++r)
      (void)links_.data[r]->send(FrameKind::Abort, message);
  } else {
    (void)links_.data[0]->send(FrameKind::Abort, message);
  }
  return why;
}

void SocketCollective::abort(int rank, const absl::Status &why) {
  if (failed_.load())
    return;
  // "rank 1 closed its connection" names its rank already.
  std::string named = absl::StrCat("rank ", rank, " ");
  (void)fail(absl::StartsWith(why.message(), named)
                 ? why
                 : absl::Status(why.code(), absl::StrCat("rank ", rank, ": ",
                                                         why.message())));
}

absl::Status SocketCollective::exchange(
    const char *what, std::string_view mine, size_t resultBytes,
    const std::function<void(const std::vector<std::string> &, char *)>
        &combine,
    char *out) {
  if (failed_.load()) {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }
  const int64_t n = collectives_++;
  // A frame of the wrong kind or size: the ranks run different plans.
  auto check = [&](absl::StatusOr<Frame> &f, FrameKind kind, size_t bytes,
                   int peer) -> absl::Status {
    if (!f.ok()) {
      if (absl::IsCancelled(f.status())) { // failed meanwhile, here
        std::lock_guard<std::mutex> lock(mutex_);
        return failure_;
      }
      if (absl::IsDeadlineExceeded(f.status()))
        return fail(absl::DeadlineExceededError(absl::StrCat(
            what, " #", n, ": rank ", links_.rank, " waited ", timeout_.count(),
            " ms for rank ", peer,
            " (a rank that hangs, or ranks that run different plans)")));
      return fail(
          absl::Status(f.status().code(), absl::StrCat(what, " #", n, ": ",
                                                       f.status().message())));
    }
    if (f->kind == FrameKind::Abort)
      return fail(absl::AbortedError(f->bytes));
    if (f->kind != kind || f->bytes.size() != bytes)
      return fail(absl::DataLossError(absl::StrCat(
          what, " #", n, ": rank ", peer, " sent ", f->bytes.size(),
          " bytes where rank ", links_.rank, " expected ", bytes,
          " (ranks that run different plans)")));
    return absl::OkStatus();
  };
  if (links_.rank != 0) {
    if (absl::Status s = links_.data[0]->send(FrameKind::Input, mine); !s.ok())
      return fail(s);
    auto result = links_.data[0]->receive(
        std::chrono::steady_clock::now() + timeout_, &failed_);
    if (absl::Status s = check(result, FrameKind::Result, resultBytes, 0);
        !s.ok())
      return s;
    std::memcpy(out, result->bytes.data(), resultBytes);
    return absl::OkStatus();
  }
  std::vector<std::string> inputs(links_.worldSize);
  for (int r = 1; r < links_.worldSize; ++r) {
    auto input = links_.data[r]->receive(
        std::chrono::steady_clock::now() + timeout_, &failed_);
    if (absl::Status s = check(input, FrameKind::Input, mine.size(), r);
        !s.ok())
      return s;
    inputs[r] = std::move(input->bytes);
  }
  inputs[0] = std::string(mine);
  std::string result(resultBytes, '\0');
  combine(inputs, result.data());
  for (int r = 1; r < links_.worldSize; ++r)
    if (absl::Status s = links_.data[r]->send(FrameKind::Result, result);
        !s.ok())
      return fail(s);
  std::memcpy(out, result.data(), resultBytes);
  return absl::OkStatus();
}

absl::Status SocketCollective::allReduce(int rank, const uint16_t *input,
                                         const uint16_t *residual,
                                         uint16_t *out, int64_t count) {
  (void)rank; // this process's
  const size_t bytes = size_t(count) * sizeof(uint16_t);
  return exchange(
      "all-reduce", {reinterpret_cast<const char *>(input), bytes}, bytes,
      [&](const std::vector<std::string> &inputs, char *result) {
        std::vector<const uint16_t *> each;
        for (const std::string &in : inputs)
          each.push_back(reinterpret_cast<const uint16_t *>(in.data()));
        sumInRankOrder(each, residual, reinterpret_cast<uint16_t *>(result),
                       count);
      },
      reinterpret_cast<char *>(out));
}

absl::Status SocketCollective::allGather(int rank, const float *input,
                                         float *out, int64_t rows,
                                         int64_t cols) {
  (void)rank;
  const size_t bytes = size_t(rows * cols) * sizeof(float);
  return exchange(
      "all-gather", {reinterpret_cast<const char *>(input), bytes},
      bytes * links_.worldSize,
      [&](const std::vector<std::string> &inputs, char *result) {
        std::vector<const float *> each;
        for (const std::string &in : inputs)
          each.push_back(reinterpret_cast<const float *>(in.data()));
        gatherColumns(each, reinterpret_cast<float *>(result), rows, cols);
      },
      reinterpret_cast<char *>(out));
}

} // namespace kiln
