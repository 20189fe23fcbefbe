#include "runtime/Weights.h"
#include "TestFiles.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
void writeTensor(const std::string &path, const std::string &name,
                 std::vector<int64_t> shape) {
  std::vector<float> zeros(64, 0.0f);
  ASSERT_TRUE(
      writeSafeTensors(path, {{name, DType::F32, shape, zeros.data()}}).ok());
}
} // namespace

TEST(Weights, SingleFile) {
  test::TempDir dir;
  writeTensor(dir.file("model.safetensors"), "w", {2, 4});
  ASSERT_TRUE(WeightSet::present(dir.file("")));
  auto set = WeightSet::open(dir.file(""));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE((*set)->check({{"w", {2, 4}}}).ok());
  EXPECT_EQ((*set)->check({{"w", {4, 2}}}).message(),
            dir.file("model.safetensors") +
                ": weight 'w' has shape [2, 4], the config needs [4, 2]");
  EXPECT_EQ((*set)->check({{"v", {1}}}).message(),
            dir.file("model.safetensors") + ": missing weight 'v'");
}

TEST(Weights, ShardsThroughTheIndex) {
  test::TempDir dir;
  writeTensor(dir.file("model-00001-of-00002.safetensors"), "a", {4});
  writeTensor(dir.file("model-00002-of-00002.safetensors"), "b", {8});
  test::writeFile(dir.file("model.safetensors.index.json"),
                  R"({"metadata":{},"weight_map":{)"
                  R"("a":"model-00001-of-00002.safetensors",)"
                  R"("b":"model-00002-of-00002.safetensors"}})");
  auto set = WeightSet::open(dir.file(""));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE((*set)->check({{"a", {4}}, {"b", {8}}}).ok());
}

TEST(Weights, BadIndexes) {
  test::TempDir dir;
  std::string index = dir.file("model.safetensors.index.json");
  auto error = [&](const std::string &json) {
    test::writeFile(index, json);
    auto set = WeightSet::open(dir.file(""));
    return set.ok() ? std::string("ok") : std::string(set.status().message());
  };
  writeTensor(dir.file("s1.safetensors"), "a", {4});
  EXPECT_EQ(error("{"), index + ": not valid JSON");
  EXPECT_EQ(error("{}"), index + ": has no 'weight_map' object");
  EXPECT_EQ(error(R"({"weight_map":{"a":"../s1.safetensors"}})"),
            index + ": weight_map entry 'a' names '../s1.safetensors', not a "
                    "file in the folder");
  EXPECT_EQ(error(R"({"weight_map":{"b":"s1.safetensors"}})"),
            dir.file("s1.safetensors") +
                ": has no tensor 'b', which the index places there");
  EXPECT_EQ(error(R"({"weight_map":{"a":"s2.safetensors"}})"),
            dir.file("s2.safetensors") + ": No such file or directory");
  EXPECT_EQ(error(R"({"weight_map":{"a":"s1.safetensors"}})"), "ok");
}

TEST(Weights, NoWeightsAtAll) {
  test::TempDir dir;
  EXPECT_FALSE(WeightSet::present(dir.file("")));
  auto set = WeightSet::open(dir.file(""));
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("has neither model.safetensors nor "
                                        "model.safetensors.index.json"),
            absl::string_view::npos);
}
