//===- InProcessCollectiveTest.cpp - the emu device's stand-in for NCCL ---===//
#include "runtime/InProcessCollective.h"
#include "runtime/DType.h"

#include "absl/strings/str_cat.h"

#include "RankThreads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

using namespace kiln;
using namespace std::chrono_literals;

TEST(InProcessCollective, AllReduceSumsInFloatAndAddsTheResidualOnce) {
  const int ranks = 4;
  const int64_t n = 1000;
  InProcessCollective c(ranks, 10s);
  std::vector<std::vector<uint16_t>> data(ranks, std::vector<uint16_t>(n));
  std::vector<uint16_t> residual(n);
  for (int64_t i = 0; i < n; ++i) {
    residual[i] = floatToHalf(0.001f * float(i));
    for (int r = 0; r < ranks; ++r)
      data[r][i] = floatToHalf(0.37f * float(r + 1) - 0.003f * float(i));
  }
  auto inputs = data;
  // In place, as the plans do: each rank's output over its input.
  auto statuses = onRankThreads(ranks, [&](int r) {
    return c.allReduce(r, data[r].data(), residual.data(), data[r].data(), n);
  });
  for (const absl::Status &s : statuses)
    ASSERT_TRUE(s.ok()) << s;
  for (int64_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r)
      want += halfToFloat(inputs[r][i]);
    want += halfToFloat(residual[i]);
    for (int r = 0; r < ranks; ++r)
      ASSERT_EQ(data[r][i], floatToHalf(want)) << "rank " << r << " at " << i;
  }
}

TEST(InProcessCollective, AllGatherPutsTheRanksSideBySide) {
  const int ranks = 3, rows = 2, cols = 4;
  InProcessCollective c(ranks, 10s);
  std::vector<std::vector<float>> parts(ranks), out(ranks);
  for (int r = 0; r < ranks; ++r)
    for (int i = 0; i < rows * cols; ++i)
      parts[r].push_back(float(100 * r + i));
  auto statuses = onRankThreads(ranks, [&](int r) {
    out[r].resize(rows * ranks * cols);
    return c.allGather(r, parts[r].data(), out[r].data(), rows, cols);
  });
  for (const absl::Status &s : statuses)
    ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < ranks; ++r)
    for (int s = 0; s < rows; ++s)
      for (int q = 0; q < ranks; ++q)
        for (int j = 0; j < cols; ++j)
          EXPECT_EQ(out[r][(s * ranks + q) * cols + j],
                    float(100 * q + s * cols + j));
}

TEST(InProcessCollective, ManyInARowStayInStep) {
  const int ranks = 4, rounds = 2000;
  InProcessCollective c(ranks, 10s);
  std::vector<std::vector<uint16_t>> v(ranks, std::vector<uint16_t>(8));
  auto statuses = onRankThreads(ranks, [&](int r) {
    for (int k = 0; k < rounds; ++k) {
      std::fill(v[r].begin(), v[r].end(), floatToHalf(float(k % 7 + r)));
      if (absl::Status s = c.allReduce(r, v[r].data(), nullptr, v[r].data(), 8);
          !s.ok())
        return s;
      // 4 * (k % 7) + 0 + 1 + 2 + 3, the same on every rank.
      if (halfToFloat(v[r][3]) != float(4 * (k % 7) + 6))
        return absl::InternalError(absl::StrCat("round ", k));
    }
    return absl::OkStatus();
  });
  for (const absl::Status &s : statuses)
    EXPECT_TRUE(s.ok()) << s;
}

TEST(InProcessCollective, ARankThatNeverComesTimesOutOnTheOthers) {
  InProcessCollective c(3, 100ms);
  std::vector<uint16_t> x(4);
  auto start = std::chrono::steady_clock::now();
  auto statuses = onRankThreads(3, [&](int r) {
    if (r == 2) // dead
      return absl::OkStatus();
    return c.allReduce(r, x.data(), nullptr, x.data(), 4);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (int r : {0, 1}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(statuses[r].message().find("for rank 2"), std::string::npos)
        << statuses[r];
  }
  // Later collectives fail at once: the group is broken.
  EXPECT_FALSE(c.allReduce(0, x.data(), nullptr, x.data(), 4).ok());
}

TEST(InProcessCollective, ARankThatFailsStopsTheOthersAtOnce) {
  InProcessCollective c(2, 60s);
  std::vector<uint16_t> x(4);
  auto start = std::chrono::steady_clock::now();
  auto statuses = onRankThreads(2, [&](int r) {
    if (r == 1) {
      std::this_thread::sleep_for(50ms);
      c.abort(1, absl::InternalError("an illegal address"));
      return absl::OkStatus();
    }
    return c.allReduce(r, x.data(), nullptr, x.data(), 4);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInternal);
  EXPECT_EQ(statuses[0].message(), "rank 1: an illegal address");
}
