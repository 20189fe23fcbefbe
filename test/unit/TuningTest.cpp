//===- TuningTest.cpp - bucket merging and the cost model -----------------===//
#include "tune/CostModel.h"
#include "tune/TuningDb.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace kiln {
namespace {

using Times = std::map<int64_t, std::map<std::string, double>>;

TEST(MergeBuckets, NeighboursWithOneWinnerShareABucket) {
  // a wins short lengths, b long ones; at 64 they are within 3%.
  Times t = {{16, {{"a", 10}, {"b", 20}}},
             {32, {{"a", 11}, {"b", 15}}},
             {64, {{"a", 20}, {"b", 19.8}}},
             {128, {{"a", 40}, {"b", 30}}}};
  std::vector<TuningBucket> b = mergeBuckets(t);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].from, 1);
  EXPECT_EQ(b[0].to, 64); // a stays within 3% of b at 64
  EXPECT_EQ(b[0].knobs, "a");
  EXPECT_EQ(b[1].from, 65);
  EXPECT_EQ(b[1].to, 128);
  EXPECT_EQ(b[1].knobs, "b");
  EXPECT_DOUBLE_EQ(b[1].micros, 30);
}

TEST(MergeBuckets, TiesGoToTheOneThatLastsThenTheFirstKnobs) {
  // Equal at 1 and 2; only c stays best at 4: one bucket of c.
  Times t = {{1, {{"a", 5}, {"b", 5}, {"c", 5}}},
             {2, {{"a", 5}, {"b", 5}, {"c", 5}}},
             {4, {{"a", 9}, {"b", 9}, {"c", 6}}}};
  std::vector<TuningBucket> b = mergeBuckets(t);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].knobs, "c");
  EXPECT_EQ(b[0].to, 4);
  // All equal everywhere: the knobs that sort first.
  Times flat = {{1, {{"b", 5}, {"a", 5}}}, {2, {{"b", 5}, {"a", 5}}}};
  EXPECT_EQ(mergeBuckets(flat)[0].knobs, "a");
  // Without slack a 1% difference splits.
  Times close = {{1, {{"a", 100}, {"b", 101}}}, {2, {{"a", 101}, {"b", 100}}}};
  EXPECT_EQ(mergeBuckets(close, 0.0).size(), 2u);
  EXPECT_EQ(mergeBuckets(close).size(), 1u);
}

TEST(TuningDb, WritesAndReadsBackTheSameBytes) {
  TuningDb db;
  TuningEntry &e = db.entry(
      {"gpu", "sm_90", "none", "13.0", "decode.gemv", "0123", 1}, "cost-model");
  e.times = {{1, {{"gemv-rows=4", 12.5}}}, {8, {{"gemv-rows=4", 13.25}}}};
  e.buckets = mergeBuckets(e.times);
  std::string path = ::testing::TempDir() + "/kiln-tuning-db.json";
  ASSERT_TRUE(writeTuningDb(path, db).ok());
  auto back = readTuningDb(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->entries.size(), 1u);
  EXPECT_EQ(back->entries[0].key, e.key);
  EXPECT_EQ(back->entries[0].times, e.times);
  ASSERT_EQ(back->entries[0].buckets.size(), 1u);
  EXPECT_EQ(back->entries[0].buckets[0].to, 8);
  std::remove(path.c_str());
}

TEST(CostModel, OccupancyAndTails) {
  GpuModel gpu = *gpuModelFor("sm_90");
  LaunchCost l;
  l.threads = 256;
  l.registers = 32; // 8 blocks by threads, 8 by registers
  EXPECT_EQ(blocksPerSm(gpu, l), 8);
  l.registers = 128; // 32 KiB of registers a block: 2 blocks
  EXPECT_EQ(blocksPerSm(gpu, l), 2);
  l.sharedBytes = 100 * 1024; // two fit in 228 KiB
  EXPECT_EQ(blocksPerSm(gpu, l), 2);
  l.sharedBytes = 120 * 1024;
  EXPECT_EQ(blocksPerSm(gpu, l), 1);
  l.threads = 2048;
  EXPECT_FALSE(launchMicros(gpu, l).has_value());

  // A memory-bound launch: 1 GB at 4.8 TB/s is about 208 us when the
  // blocks keep enough bytes in flight, slower with narrow loads, and
  // one block more than a full wave costs a tail.
  LaunchCost big;
  big.threads = 256;
  big.registers = 32;
  big.grid = {132 * 8 * 4, 1, 1};
  big.hbmBytes = 1e9;
  double wide = *launchMicros(gpu, big);
  EXPECT_NEAR(wide, 1e9 / 4.8e12 * 1e6 + gpu.launchMicros, 1.0);
  big.loadBytes = 2;
  EXPECT_GT(*launchMicros(gpu, big), 1.2 * wide);
  big.loadBytes = 16;
  big.grid[0] += 1;
  EXPECT_GT(*launchMicros(gpu, big), wide + 1.0);
}

} // namespace
} // namespace kiln
