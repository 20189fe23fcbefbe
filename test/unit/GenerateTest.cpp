#include "runtime/Generate.h"
#include "TestFiles.h"
#include "runtime/SafeTensors.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
/// A device whose logits make token (t + 1) % V the argmax after token t,
/// and which records the positions it was given.
class CountingDevice : public Device {
public:
  explicit CountingDevice(int64_t vocab) : vocab(vocab) {}
  std::string name() const override { return "counting"; }
  absl::StatusOr<std::vector<float>>
  prefill(std::span<const int32_t> tokens,
          std::span<const int32_t> positions) override {
    std::vector<float> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto row = next(tokens[i], positions[i]);
      out.insert(out.end(), row.begin(), row.end());
    }
    return out;
  }
  absl::StatusOr<std::vector<float>> decode(int32_t token,
                                            int32_t position) override {
    return next(token, position);
  }
  std::vector<int32_t> seen;

private:
  std::vector<float> next(int32_t token, int32_t position) {
    seen.push_back(position);
    std::vector<float> row(vocab, 0.0f);
    row[(token + 1) % vocab] = 1.0f;
    return row;
  }
  int64_t vocab;
};
} // namespace

TEST(Generate, GreedyFeedsEachTokenAtTheNextPosition) {
  CountingDevice dev(10);
  auto g = generate(dev, {3, 8}, 4, 10);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->tokens, (std::vector<int32_t>{9, 0, 1, 2}));
  EXPECT_EQ(dev.seen, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(g->prefillLogits.size(), 2u * 10);
  EXPECT_EQ(g->decodeLogits.size(), 4u * 10);
}

TEST(Generate, GreedyTakesTheFirstOfEqualValuesAndNeverNaN) {
  float row[] = {0.5f, 2.0f, -1.0f, 2.0f, std::nanf("")};
  EXPECT_EQ(sampleOnHost(row, 5, {}), 1);
  float allNaN[] = {std::nanf(""), std::nanf("")};
  EXPECT_EQ(sampleOnHost(allNaN, 2, {}), 0);
}

TEST(Generate, PromptChecks) {
  EXPECT_TRUE(checkPrompt({1, 2}, 2, 10, 4).ok());
  EXPECT_FALSE(checkPrompt({}, 2, 10, 4).ok());
  EXPECT_FALSE(checkPrompt({1, 10}, 2, 10, 8).ok());
  EXPECT_FALSE(checkPrompt({-1}, 2, 10, 8).ok());
  absl::Status tooLong = checkPrompt({1, 2}, 3, 10, 4);
  EXPECT_NE(tooLong.message().find("exceeds the context of 4 tokens"),
            absl::string_view::npos)
      << tooLong;
}

TEST(Generate, DumpHasTheFixtureLayout) {
  test::TempDir dir;
  CountingDevice dev(5);
  auto g = generate(dev, {1, 2, 3}, 2, 5);
  ASSERT_TRUE(g.ok());
  std::string path = dir.file("dump.safetensors");
  ASSERT_TRUE(writeLogitsDump(path, *g).ok());
  auto file = SafeTensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorView *logits = (*file)->find("prefill_logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->dtype, DType::F32);
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ((*file)->find("decode_tokens")->dtype, DType::I32);
  EXPECT_EQ((*file)->find("decode_tokens")->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ((*file)->find("decode_logits")->shape,
            (std::vector<int64_t>{2, 5}));
  EXPECT_EQ((*file)->find("prompt_tokens")->shape, (std::vector<int64_t>{3}));
}

namespace {
/// A device whose sampling kernel is wrong: it always reports token 0.
class BadSamplingDevice : public CountingDevice {
public:
  using CountingDevice::CountingDevice;
  std::optional<int32_t> sampledToken() const override { return 0; }
};
} // namespace

TEST(Generate, ADeviceTokenThatIsNotTheArgmaxIsAnError) {
  BadSamplingDevice dev(10);
  auto g = generate(dev, {3}, 2, 10);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "counting device: step 0: sampled token 0, "
                                  "the argmax of its logits is 4");
}
