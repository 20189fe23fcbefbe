//===- SocketCollectiveTest.cpp - ranks as processes, over loopback -------===//
//
// The rendezvous and the emu device's collectives over TCP, with the ranks
// as threads of this test on 127.0.0.1: the same bits as the ranks as
// threads (InProcessCollective), and every way a rank goes wrong ends in an
// error on every rank, never a wait without end.
//
//===----------------------------------------------------------------------===//
#include "runtime/SocketCollective.h"
#include "runtime/DType.h"
#include "runtime/InProcessCollective.h"
#include "runtime/RankLink.h"

#include "absl/strings/str_cat.h"

#include "RankThreads.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace kiln;
using namespace std::chrono_literals;

namespace {
/// A port nobody listens on now.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// `ranks` ranks meet on a free port; each one's links (or its error).
std::vector<absl::StatusOr<std::unique_ptr<RankLinks>>>
meet(int ranks, const std::function<void(RendezvousOptions &)> &adjust = {},
     std::chrono::milliseconds timeout = 10s) {
  const std::string address = absl::StrCat("127.0.0.1:", freePort());
  std::vector<absl::StatusOr<std::unique_ptr<RankLinks>>> out;
  for (int r = 0; r < ranks; ++r)
    out.emplace_back(absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      RendezvousOptions o{address, r, ranks, timeout, "digest"};
      if (adjust)
        adjust(o);
      out[r] = rendezvous(o, r == 0 ? "payload" : "");
    });
  for (std::thread &t : threads)
    t.join();
  return out;
}

} // namespace

TEST(SocketCollective, TheSameBitsAsTheRanksAsThreads) {
  const int ranks = 3;
  const int64_t n = 777, rows = 3, cols = 5;
  auto links = meet(ranks);
  for (auto &l : links)
    ASSERT_TRUE(l.ok()) << l.status();
  for (auto &l : links)
    EXPECT_EQ((*l)->payload, "payload");
  std::vector<std::unique_ptr<SocketCollective>> socket;
  for (auto &l : links)
    socket.push_back(std::make_unique<SocketCollective>(**l, 10s));
  InProcessCollective threads(ranks, 10s);
  std::vector<std::vector<uint16_t>> data(ranks, std::vector<uint16_t>(n));
  std::vector<uint16_t> residual(n);
  for (int64_t i = 0; i < n; ++i) {
    residual[i] = floatToHalf(0.01f * float(i % 13));
    for (int r = 0; r < ranks; ++r)
      data[r][i] = floatToHalf(0.31f * float(r + 1) - 0.007f * float(i));
  }
  auto viaSocket = data, viaThreads = data;
  for (int repeat = 0; repeat < 3; ++repeat) { // several in a row stay in step
    for (auto *run : {&viaSocket, &viaThreads}) {
      auto statuses = onRankThreads(ranks, [&](int r) {
        uint16_t *d = (*run)[r].data();
        return run == &viaSocket
                   ? socket[r]->allReduce(r, d, residual.data(), d, n)
                   : threads.allReduce(r, d, residual.data(), d, n);
      });
      for (const absl::Status &s : statuses)
        ASSERT_TRUE(s.ok()) << s;
    }
  }
  EXPECT_EQ(viaSocket, viaThreads);
  for (int r = 1; r < ranks; ++r)
    EXPECT_EQ(viaSocket[r], viaSocket[0]);

  std::vector<std::vector<float>> in(ranks, std::vector<float>(rows * cols));
  for (int r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < rows * cols; ++i)
      in[r][i] = float(100 * r + i);
  std::vector<std::vector<float>> out(ranks,
                                      std::vector<float>(rows * ranks * cols));
  auto statuses = onRankThreads(ranks, [&](int r) {
    return socket[r]->allGather(r, in[r].data(), out[r].data(), rows, cols);
  });
  for (const absl::Status &s : statuses)
    ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < ranks; ++r)
    for (int64_t s = 0; s < rows; ++s)
      for (int q = 0; q < ranks; ++q)
        for (int64_t j = 0; j < cols; ++j)
          ASSERT_EQ(out[r][(s * ranks + q) * cols + j], in[q][s * cols + j]);
}

TEST(SocketCollective, ARankThatFailsStopsTheOthersAtOnce) {
  const int ranks = 3;
  auto links = meet(ranks);
  for (auto &l : links)
    ASSERT_TRUE(l.ok()) << l.status();
  std::vector<std::unique_ptr<SocketCollective>> c;
  for (auto &l : links)
    c.push_back(std::make_unique<SocketCollective>(**l, 60s));
  auto began = std::chrono::steady_clock::now();
  auto statuses = onRankThreads(ranks, [&](int r) {
    uint16_t x = 0;
    if (r == 2) { // fails before its collective
      c[r]->abort(r, absl::InternalError("emu device: a fault"));
      return absl::InternalError("emu device: a fault");
    }
    return c[r]->allReduce(r, &x, nullptr, &x, 1);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(statuses[r].ok());
    EXPECT_NE(statuses[r].message().find("rank 2: emu device: a fault"),
              std::string::npos)
        << statuses[r];
  }
}

TEST(SocketCollective, ARankThatDiesOrHangsEndsTheCollective) {
  auto links = meet(2);
  for (auto &l : links)
    ASSERT_TRUE(l.ok()) << l.status();
  SocketCollective zero(**links[0], 300ms);
  uint16_t x = 0;
  // Rank 1 does not come: rank 0 waits 300 ms.
  absl::Status s = zero.allReduce(0, &x, nullptr, &x, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("all-reduce #0: rank 0 waited 300 ms for rank 1"),
            std::string::npos)
      << s;
  // After a failure every collective fails at once.
  EXPECT_FALSE(zero.allReduce(0, &x, nullptr, &x, 1).ok());

  auto again = meet(2);
  for (auto &l : again)
    ASSERT_TRUE(l.ok()) << l.status();
  SocketCollective one(**again[0], 60s);
  again[1]->reset(); // rank 1's connections close: it died
  s = one.allReduce(0, &x, nullptr, &x, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1 closed its connection"), std::string::npos)
      << s;
}

TEST(RankLink, TheRendezvousRefusesWhatDoesNotFit) {
  // Another bundle: both ranks say so.
  auto differs = meet(2, [](RendezvousOptions &o) {
    if (o.rank == 1)
      o.digest = "other";
  });
  for (auto &l : differs) {
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.status().message().find(
                  "rank 1's bundle differs from rank 0's (other, "
                  "rank 0's digest)"),
              std::string::npos)
        << l.status();
  }
  // Another world size.
  auto world = meet(2, [](RendezvousOptions &o) {
    if (o.rank == 1)
      o.worldSize = 3;
  });
  ASSERT_FALSE(world[0].ok());
  EXPECT_NE(
      world[0].status().message().find("rank 1 says --world-size 3, rank 0 2"),
      std::string::npos)
      << world[0].status();
  // Two rank 1s.
  auto twice = meet(3, [](RendezvousOptions &o) {
    if (o.rank == 2)
      o.rank = 1;
  });
  ASSERT_FALSE(twice[0].ok());
  EXPECT_NE(
      twice[0].status().message().find("two processes say they are rank 1"),
      std::string::npos)
      << twice[0].status();
  // Nobody listens: a rank stops trying at its timeout.
  RendezvousOptions alone{absl::StrCat("127.0.0.1:", freePort()), 1, 2, 300ms,
                          "digest"};
  auto lonely = rendezvous(alone);
  ASSERT_FALSE(lonely.ok());
  EXPECT_NE(lonely.status().message().find(
                "rank 1 could not reach rank 0 within 300 ms"),
            std::string::npos)
      << lonely.status();
  // The flags.
  auto flags = [](std::string address, int rank, int world) {
    RendezvousOptions o;
    o.address = address;
    o.rank = rank;
    o.worldSize = world;
    return checkRendezvous(o);
  };
  EXPECT_FALSE(flags("host", 0, 2).ok());
  EXPECT_FALSE(flags("host:0", 0, 2).ok());
  EXPECT_FALSE(flags("host:29500", 2, 2).ok());
  EXPECT_FALSE(flags("host:29500", 0, 1).ok());
  EXPECT_TRUE(flags("host:29500", 1, 2).ok());
}
