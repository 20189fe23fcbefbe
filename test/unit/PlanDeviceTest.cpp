#include "runtime/PlanDevice.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
/// A Program of one kernel and one GEMM in every kind of plan.
Program smallProgram() {
  Program p;
  p.vocab = 8;
  p.sequences = 2;
  p.tableBlocks = 2;
  p.poolBlocks = 4;
  p.arenaBytes = 1 << 20;
  p.poolBytes = 3 << 20;
  p.workspaceFloats = 256;
  p.kernels.push_back({"decode.attn", "kiln_decode_attn", "", "layers.0", 3});
  Launch kernel{0, "layers.0.attn", {32, 4, 1}, 128, {}, {}};
  Launch gemm{kGemm, "layers.0.mlp", {1, 1, 1}, 0, {}, {16, 64, 32, 2}};
  p.decode = {kernel};
  p.prefill = {StepPlan{16, {gemm, kernel}}};
  p.batches = {StepPlan{2, {gemm, kernel}}};
  return p;
}

class FakeDevice : public PlanDevice {
public:
  explicit FakeDevice(Program p) : PlanDevice(std::move(p)) {}
  std::string name() const override { return "fake"; }
  using PlanDevice::checkMemory;

private:
  absl::Status sendInputs(int64_t) override { return absl::OkStatus(); }
  absl::Status sendTables() override { return absl::OkStatus(); }
  absl::Status sendLogitBias(int32_t) override { return absl::OkStatus(); }
  absl::Status run(const std::vector<Launch> &) override {
    return absl::OkStatus();
  }
  absl::Status clearHistory(int32_t) override { return absl::OkStatus(); }
  absl::Status readLogits(int64_t, float *, size_t) override {
    return absl::OkStatus();
  }
  absl::Status readSampled(int64_t) override { return absl::OkStatus(); }
};
} // namespace

TEST(PlanDevice, DescribesALaunchWithItsPlan) {
  FakeDevice dev(smallProgram());
  const Program &p = dev.program();
  EXPECT_EQ(dev.describeLaunch(p.decode[0], p.decode),
            "kernel kiln_decode_attn (layers.0.attn, grid 32x4x1, block 128, "
            "plan decode)");
  EXPECT_EQ(dev.describeLaunch(p.prefill[0].launches[1], p.prefill[0].launches),
            "kernel kiln_decode_attn (layers.0.attn, grid 32x4x1, block 128, "
            "plan prefill bucket of 16 rows)");
  EXPECT_EQ(dev.describeLaunch(p.batches[0].launches[0], p.batches[0].launches),
            "cuBLAS GEMM [16, 32] . [64, 32]^T (layers.0.mlp, algo 2, plan "
            "batch of 2 sequences)");
  std::vector<Launch> elsewhere = p.decode;
  EXPECT_EQ(dev.planName(elsewhere), "a plan not in the program");
}

TEST(PlanDevice, MemoryBesideThePlan) {
  Program p = smallProgram();
  auto parts = gpuMemoryBeside(p, /*randomWeights=*/true, 50 << 20);
  std::vector<std::string> names;
  int64_t total = 0;
  for (const MemoryPart &part : parts) {
    names.push_back(part.name);
    total += part.bytes;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "cuBLAS workspace", "cuBLAS handles",
                       "random-weights block", "L2 flush buffer", "margin"}));
  EXPECT_EQ(total, (32 + 128 + 32 + 100 + 256) << 20);
  // No GEMM, real weights, no L2: only the margin.
  p.prefill[0].launches.erase(p.prefill[0].launches.begin());
  p.batches.clear();
  parts = gpuMemoryBeside(p, false, 0);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].name, "margin");
}

TEST(PlanDevice, ARefusalNamesEveryPart) {
  FakeDevice dev(smallProgram());
  auto beside = gpuMemoryBeside(dev.program(), true, 50 << 20);
  EXPECT_TRUE(dev.checkMemory(int64_t(1) << 40, "plenty", beside).ok());
  absl::Status s =
      dev.checkMemory(500 << 20, "the GPU has 500.0 MiB free", beside);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "fake device: needs 552.0 MiB (weights 0.0 MiB, arena 1.0 MiB, KV "
            "pool 3.0 MiB, workspace 0.0 MiB, tables and state 0.0 MiB, cuBLAS "
            "workspace 32.0 MiB, cuBLAS handles 128.0 MiB, random-weights "
            "block 32.0 MiB, L2 flush buffer 100.0 MiB, margin 256.0 MiB); the "
            "GPU has 500.0 MiB free");
}

namespace {
/// Records the launches each step runs (PlanDevice::runs).
class RecordingDevice : public PlanDevice {
public:
  explicit RecordingDevice(Program p) : PlanDevice(std::move(p)) {}
  std::string name() const override { return "recording"; }
  std::vector<std::string> ran;

private:
  absl::Status sendInputs(int64_t) override { return absl::OkStatus(); }
  absl::Status sendTables() override { return absl::OkStatus(); }
  absl::Status sendLogitBias(int32_t) override { return absl::OkStatus(); }
  absl::Status run(const std::vector<Launch> &launches) override {
    ran.clear();
    for (const Launch &l : launches)
      if (runs(l))
        ran.push_back(l.name);
    return absl::OkStatus();
  }
  absl::Status clearHistory(int32_t) override { return absl::OkStatus(); }
  absl::Status readLogits(int64_t, float *, size_t) override {
    return absl::OkStatus();
  }
  absl::Status readSampled(int64_t) override { return absl::OkStatus(); }
};
} // namespace

// A prefill runs the LM head of every row when its logits are read back,
// else that of the last row, whose logits alone it then has.
TEST(PlanDevice, TheLmHeadOfEveryRowOnlyWhenTheLogitsAreRead) {
  Program p = smallProgram();
  p.poolBlocks = 8;
  p.tableBlocks = 8;
  p.blockSize = 16;
  p.maxPositions = 128;
  Launch every{0, "every", {1, 1, 1}, 32, {}, {}};
  every.when = LaunchWhen::EveryLogit;
  Launch last{0, "last", {1, 1, 1}, 32, {}, {}};
  last.when = LaunchWhen::LastLogit;
  Launch always{0, "always", {1, 1, 1}, 32, {}, {}};
  p.prefill = {StepPlan{16, {always, every, last}}};
  RecordingDevice dev(p);
  std::vector<int32_t> tokens = {1, 2, 3};
  ASSERT_TRUE(dev.prefillSequence(0, tokens, 0, {}, true).ok());
  EXPECT_EQ(dev.ran, (std::vector<std::string>{"always", "every"}));
  EXPECT_TRUE(dev.lastLogits(0).ok());
  ASSERT_TRUE(dev.prefillSequence(0, tokens, 0, {}, false).ok());
  EXPECT_EQ(dev.ran, (std::vector<std::string>{"always", "last"}));
  EXPECT_TRUE(dev.lastLogits(2).ok());
  auto other = dev.lastLogits(1);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "recording device: the last step computed the logits of its last "
            "row (2) only, not of row 1");
  // A decode step has no such launches: every row's logits, asked or not.
  ASSERT_TRUE(dev.setTable(1, std::vector<int32_t>{4}).ok());
  ASSERT_TRUE(dev.decodeBatch(
                     std::vector<BatchRow>{{0, 1, 3, {}}, {1, 2, 0, {}}}, false)
                  .ok());
  EXPECT_TRUE(dev.lastLogits(0).ok());
}
