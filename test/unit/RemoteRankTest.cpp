//===- RemoteRankTest.cpp - rank 0's steps, followed over a connection ----===//
//
// Ranks that are processes (docs/tensor-parallel.md): rank 0's
// TensorParallelDevice sends every call of a step to a RemoteRank, and the
// rank's process makes the same call on its own device
// (RemoteRank::followRankZero). Here both ends are threads of this test
// joined by a socket pair, each device a recording fake: the follower sees
// what rank 0's own rank sees, call for call; a malformed command and a
// failing rank end the step with an error on both sides, and the first
// failure is what the follower ends with.
//
//===----------------------------------------------------------------------===//
#include "runtime/RemoteRank.h"
#include "runtime/TensorParallelDevice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <gtest/gtest.h>

#include <thread>

#include <sys/socket.h>

using namespace kiln;

namespace {

Program smallProgram() {
  Program p;
  p.vocab = 8;
  p.sequences = 2;
  p.tableBlocks = 2;
  p.poolBlocks = 4;
  p.blockSize = 16;
  p.kernels.push_back({"decode.attn", "kiln_decode_attn", "", "layers.0", 3});
  Launch kernel{0, "layers.0.attn", {32, 4, 1}, 128, {}, {}};
  p.decode = {kernel};
  p.prefill = {StepPlan{16, {kernel}}};
  p.batches = {StepPlan{2, {kernel}}};
  return p;
}

/// Records every call with the staged state it sees.
class RecordingRank : public PlanDevice {
public:
  explicit RecordingRank(Program p) : PlanDevice(std::move(p)) {}
  std::string name() const override { return "recording"; }
  std::vector<std::string> calls;
  bool failRuns = false;

private:
  absl::Status sendInputs(int64_t rows) override {
    calls.push_back(absl::StrCat("inputs ", rows, " count ", count_[0],
                                 " tokens ", absl::StrJoin(tokens_, ","),
                                 " positions ", absl::StrJoin(positions_, ","),
                                 " seqs ", absl::StrJoin(rowSeqs_, ","),
                                 " seed ", sampling_[1].seed));
    return absl::OkStatus();
  }
  absl::Status sendTables() override {
    calls.push_back("tables " + absl::StrJoin(tables_, ","));
    return absl::OkStatus();
  }
  absl::Status sendLogitBias(int32_t seq) override {
    calls.push_back(absl::StrCat("bias ", seq, " ", logitBias_[seq * 8 + 3]));
    return absl::OkStatus();
  }
  absl::Status run(const std::vector<Launch> &launches) override {
    auto ref = program_.refOf(launches);
    calls.push_back(absl::StrCat("run ", ref ? int(ref->kind) : -1, ".",
                                 ref ? ref->index : -1, " every ",
                                 everyLogit_));
    if (failRuns)
      return absl::InternalError("emu device: a fault in layers.0.attn");
    return absl::OkStatus();
  }
  absl::Status clearHistory(int32_t seq) override {
    calls.push_back(absl::StrCat("clear ", seq));
    return absl::OkStatus();
  }
  absl::Status readLogits(int64_t, float *out, size_t n) override {
    std::fill_n(out, n, 0.0f);
    return absl::OkStatus();
  }
  absl::Status readSampled(int64_t) override { return absl::OkStatus(); }
};

class RecordingAbort : public RankAbort {
public:
  void abort(int rank, const absl::Status &why) override {
    aborts.push_back(absl::StrCat(rank, ": ", why.message()));
  }
  std::vector<std::string> aborts;
};

/// Rank 0 (a recording rank and a RemoteRank) and rank 1's follower on a
/// thread, joined by a socket pair.
struct TwoRanks {
  RecordingRank *zero = nullptr;
  RecordingRank follower{smallProgram()};
  RecordingAbort followerAborts;
  std::unique_ptr<RankSocket> toOne, toZero;
  std::unique_ptr<TensorParallelDevice> device;
  absl::Status followed = absl::UnknownError("still following");
  std::thread thread;

  TwoRanks() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    toOne = std::make_unique<RankSocket>(fds[0], 1);
    toZero = std::make_unique<RankSocket>(fds[1], 0);
    auto own = std::make_unique<RecordingRank>(smallProgram());
    zero = own.get();
    std::vector<std::unique_ptr<PlanDevice>> ranks;
    ranks.push_back(std::move(own));
    ranks.push_back(
        std::make_unique<RemoteRank>(smallProgram(), *toOne, nullptr));
    device = std::make_unique<TensorParallelDevice>(
        std::move(ranks), std::make_unique<RecordingAbort>());
    thread = std::thread([this] {
      followed =
          RemoteRank::followRankZero(follower, 1, *toZero, followerAborts);
    });
  }
  /// Ends the run (rank 0's device goes) and waits for the follower.
  void end() {
    device.reset();
    if (thread.joinable())
      thread.join();
  }
  ~TwoRanks() { end(); }
};

} // namespace

TEST(RemoteRank, TheFollowerMakesRankZerosCallsWithItsInputs) {
  TwoRanks t;
  ASSERT_TRUE(t.device->setTable(1, std::vector<int32_t>{3, 2}).ok());
  ASSERT_TRUE(t.device->setLogitBias(1, LogitBias{{3, 2.5f}}).ok());
  SamplingParams sampling;
  sampling.seed = 77;
  auto prefill = t.device->prefillSequence(1, std::vector<int32_t>{5, 6, 7}, 0,
                                           sampling, true);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  std::vector<BatchRow> rows = {{0, 9, 3, {}}, {1, 4, 3, sampling}};
  auto step = t.device->decodeBatch(rows, false);
  ASSERT_TRUE(step.ok()) << step.status();
  std::vector<std::string> zeroCalls = t.zero->calls; // gone with the device
  t.end();
  EXPECT_TRUE(t.followed.ok()) << t.followed;
  EXPECT_EQ(zeroCalls.size(), 7u) << absl::StrJoin(zeroCalls, "\n");
  EXPECT_EQ(t.follower.calls, zeroCalls);
  EXPECT_TRUE(t.followerAborts.aborts.empty());
}

TEST(RemoteRank, AFailingFollowerFailsTheStepOnBothSides) {
  TwoRanks t;
  t.follower.failRuns = true;
  ASSERT_TRUE(t.device->setTable(1, std::vector<int32_t>{3, 2}).ok());
  std::vector<BatchRow> rows = {{0, 9, 3, {}}, {1, 4, 3, {}}};
  auto step = t.device->decodeBatch(rows, false);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(std::string(step.status().message()),
            "rank 1: emu device: a fault in layers.0.attn");
  t.end();
  // The follower aborted its collectives at once and ends with its fault.
  EXPECT_EQ(
      t.followerAborts.aborts,
      std::vector<std::string>{"1: emu device: a fault in layers.0.attn"});
  EXPECT_EQ(std::string(t.followed.message()),
            "emu device: a fault in layers.0.attn");
}

TEST(RemoteRank, AMalformedCommandIsAnErrorNotACrash) {
  TwoRanks t;
  // A command that is not one, then one whose inputs have the wrong size.
  for (std::string bytes : {std::string("\x09garbage"),
                            std::string("\x01\x02\x00\x00\x00\x00\x00\x00")}) {
    ASSERT_TRUE(t.toOne->send(FrameKind::Command, bytes).ok());
    auto reply = t.toOne->receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->kind, FrameKind::Reply);
    EXPECT_NE(reply->bytes.find("does not fit this rank's plans"),
              std::string::npos)
        << reply->bytes;
  }
  t.end();
  EXPECT_FALSE(t.followed.ok());
  EXPECT_EQ(t.followerAborts.aborts.size(), 2u);
  EXPECT_TRUE(t.follower.calls.empty());
}
