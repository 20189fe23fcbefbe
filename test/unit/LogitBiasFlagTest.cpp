//===- LogitBiasFlagTest.cpp - --logit-bias, inline and from a file -------===//
#include "runtime/RunOptions.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

TEST(LogitBiasFlag, InlineAndFileGiveTheSameFloats) {
  auto inline_ = parseLogitBias("5=0.1234567, 7=-inf", 320);
  ASSERT_TRUE(inline_.ok()) << inline_.status();
  std::string path =
      (std::filesystem::temp_directory_path() / "kiln-bias.json").string();
  std::ofstream(path) << R"({"5": 0.1234567, "9": -100})";
  auto file = parseLogitBias("@" + path, 320);
  std::filesystem::remove(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(inline_->size(), 2u);
  ASSERT_EQ(file->size(), 2u);
  // Every digit the file gives reaches the float (no text round trip).
  EXPECT_EQ((*file)[0], (std::pair<int32_t, float>{5, 0.1234567f}));
  EXPECT_EQ((*inline_)[0], (*file)[0]);
  EXPECT_EQ((*inline_)[1].first, 7);
  EXPECT_TRUE(std::isinf((*inline_)[1].second) && (*inline_)[1].second < 0);
  EXPECT_EQ((*file)[1], (std::pair<int32_t, float>{9, -100.0f}));
}

} // namespace
} // namespace kiln
