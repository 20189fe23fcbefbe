//===- RankThreads.h - a test's ranks as threads ----------------*- C++ -*-===//
#ifndef KILN_TEST_UNIT_RANKTHREADS_H
#define KILN_TEST_UNIT_RANKTHREADS_H

#include "absl/status/status.h"

#include <functional>
#include <thread>
#include <vector>

namespace kiln {

/// Runs `body(rank)` on `ranks` threads at once; their statuses by rank.
inline std::vector<absl::Status>
onRankThreads(int ranks, const std::function<absl::Status(int)> &body) {
  std::vector<absl::Status> out(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { out[r] = body(r); });
  for (std::thread &t : threads)
    t.join();
  return out;
}

} // namespace kiln

#endif // KILN_TEST_UNIT_RANKTHREADS_H
