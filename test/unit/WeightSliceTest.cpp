//===- WeightSliceTest.cpp - a rank's slice of a checkpoint tensor --------===//
//
// Tensor parallelism (docs/tensor-parallel.md): WeightProvider packs the
// part of each sharded source that rank r of R holds, rows or columns,
// and replicated parts (fewer parts than ranks) for the ranks that share
// them; held to the whole tensor packed and cut by hand.
//
//===----------------------------------------------------------------------===//
#include "runtime/DType.h"
#include "runtime/PlanDevice.h"
#include "runtime/RunOptions.h"
#include "runtime/Weights.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace kiln;

namespace {

std::string model() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures") + "/tiny-gqa/model-f16";
}

/// A buffer of one source (rows of a slice: `source.shape`).
WeightBuffer buffer(const WeightSource &source) {
  WeightBuffer b;
  b.name = source.name;
  b.sources = {source};
  b.cols = source.shape.back();
  return b;
}

std::vector<uint16_t> halves(const std::vector<uint8_t> &bytes) {
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

/// The whole tensor `name` ([rows, cols]) as the provider packs it.
std::vector<uint16_t> whole(const WeightSet &w, const std::string &name,
                            int64_t rows, int64_t cols) {
  WeightBuffer b = buffer({name, {rows, cols}});
  auto packed = WeightProvider::checkpoint(w).pack(b);
  EXPECT_TRUE(packed.ok()) << packed.status();
  return halves(*packed);
}

} // namespace

TEST(WeightSlice, RowsAndColumnsOfEachRank) {
  auto weights = WeightSet::open(model());
  ASSERT_TRUE(weights.ok()) << weights.status();
  // q_proj [64, 64] by rows; o_proj [64, 64] by columns; over 2 ranks.
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const std::string o = "model.layers.0.self_attn.o_proj.weight";
  std::vector<uint16_t> qWhole = whole(**weights, q, 64, 64);
  std::vector<uint16_t> oWhole = whole(**weights, o, 64, 64);
  for (int rank = 0; rank < 2; ++rank) {
    auto provider = WeightProvider::checkpoint(**weights, rank, 2);
    WeightBuffer rows = buffer({q, {32, 64}, 0, 2});
    auto qPart = provider.pack(rows);
    ASSERT_TRUE(qPart.ok()) << qPart.status();
    std::vector<uint16_t> got = halves(*qPart);
    ASSERT_EQ(got.size(), 32u * 64u);
    for (int64_t i = 0; i < 32 * 64; ++i)
      ASSERT_EQ(got[i], qWhole[rank * 32 * 64 + i]) << "rank " << rank;
    WeightBuffer cols = buffer({o, {64, 32}, 1, 2});
    auto oPart = provider.pack(cols);
    ASSERT_TRUE(oPart.ok()) << oPart.status();
    got = halves(*oPart);
    ASSERT_EQ(got.size(), 64u * 32u);
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t c = 0; c < 32; ++c)
        ASSERT_EQ(got[r * 32 + c], oWhole[r * 64 + rank * 32 + c])
            << "rank " << rank << " at " << r << ", " << c;
  }
}

TEST(WeightSlice, FewerPartsThanRanksAreShared) {
  auto weights = WeightSet::open(model());
  ASSERT_TRUE(weights.ok()) << weights.status();
  // k_proj [32, 64]: 2 KV heads over 4 ranks, each kept by two ranks.
  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  std::vector<uint16_t> kWhole = whole(**weights, k, 32, 64);
  for (int rank = 0; rank < 4; ++rank) {
    WeightBuffer b = buffer({k, {16, 64}, 0, 2});
    auto part = WeightProvider::checkpoint(**weights, rank, 4).pack(b);
    ASSERT_TRUE(part.ok()) << part.status();
    std::vector<uint16_t> got = halves(*part);
    int head = rank / 2;
    for (int64_t i = 0; i < 16 * 64; ++i)
      ASSERT_EQ(got[i], kWhole[head * 16 * 64 + i]) << "rank " << rank;
  }
}

TEST(WeightSlice, TheCheckpointIsCheckedWhole) {
  auto weights = WeightSet::open(model());
  ASSERT_TRUE(weights.ok()) << weights.status();
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  // A slice of a tensor the checkpoint does not have whole.
  WeightBuffer b = buffer({q, {48, 64}, 0, 2});
  auto part = WeightProvider::checkpoint(**weights, 0, 2).pack(b);
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.status().message().find("of shape [96, 64]"),
            std::string::npos)
      << part.status();
  // What a bundle's manifest asks of the checkpoint: the whole tensor.
  std::vector<WeightSpec> specs = manifestSpecs({b});
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{96, 64}));
}
