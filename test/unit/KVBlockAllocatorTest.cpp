#include "runtime/KVBlockAllocator.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

using namespace kiln;

// A batch of sequences of random lengths, grown as decode grows them, in a
// pool sized as kiln-plan-kv-pool sizes it (max batch x max context in
// blocks of 16): the slots allocated but unused stay under 4%.
TEST(KVBlockAllocator, WasteUnderFourPercentForARandomBatch) {
  constexpr int64_t kBlock = 16, kBatch = 64, kContext = 4096;
  KVBlockAllocator pool(kBatch * ((kContext + kBlock - 1) / kBlock), kBlock);
  std::mt19937 rng(2026); // fixed: the same batch on every run
  std::uniform_int_distribution<int64_t> prompt(16, 2048), generated(1, 2048);
  for (int64_t seq = 0; seq < kBatch; ++seq) {
    int64_t tokens = prompt(rng);
    ASSERT_TRUE(pool.reserve(seq, tokens).ok());
    for (int64_t n = generated(rng); n > 0; --n) // one decode step at a time
      ASSERT_TRUE(pool.reserve(seq, ++tokens).ok());
  }
  double waste = double(pool.allocatedTokens() - pool.usedTokens()) /
                 double(pool.allocatedTokens());
  EXPECT_LT(waste, 0.04) << pool.allocatedTokens() << " slots allocated, "
                         << pool.usedTokens() << " used";
  // No block serves two sequences.
  std::set<int32_t> seen;
  for (int64_t seq = 0; seq < kBatch; ++seq)
    for (int32_t b : pool.blockTable(seq))
      EXPECT_TRUE(seen.insert(b).second) << "block " << b << " shared";
  for (int64_t seq = 0; seq < kBatch; ++seq)
    pool.release(seq);
  EXPECT_EQ(pool.freeBlocks(), kBatch * kContext / kBlock);
}

TEST(KVBlockAllocator, ExhaustionFailsOneRequestOnly) {
  KVBlockAllocator pool(4, 16);
  ASSERT_TRUE(pool.reserve(0, 40).ok()); // 3 blocks
  absl::Status s = pool.reserve(1, 33);  // needs 3, 1 is free
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "KV pool exhausted: sequence 1 needs 3 more blocks "
                         "of 16 tokens for 33 tokens, the pool has 1 free");
  EXPECT_EQ(pool.blockTable(0).size(), 3u); // the other sequence goes on
  ASSERT_TRUE(pool.reserve(0, 48).ok());    // still fits its last block
  pool.release(0);
  EXPECT_TRUE(pool.reserve(1, 33).ok());
  EXPECT_EQ(pool.blockTable(1), (std::vector<int32_t>{0, 1, 2}));
}
