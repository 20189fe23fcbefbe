#include "runtime/SafeTensors.h"
#include "TestFiles.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln::test::safetensorsBytes;

namespace {
/// Writes the bytes and returns the reader's error ("ok" when it opens).
std::string openError(const test::TempDir &dir, const std::string &bytes) {
  std::string path = dir.file("t.safetensors");
  test::writeFile(path, bytes);
  auto f = SafeTensorsFile::open(path);
  if (f.ok())
    return "ok";
  std::string m(f.status().message());
  // Errors start with the path; the tests compare what follows.
  EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;
  return m.substr(path.size() + 2);
}

const std::string kEightBytes(8, '\x01');
} // namespace

TEST(SafeTensors, WriteThenReadRoundTrips) {
  test::TempDir dir;
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f}; // [2, 3]
  std::vector<uint16_t> b = {0x3c00, 0xc000};                    // [2] f16
  std::vector<int32_t> c = {7};                                  // [1]
  std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(writeSafeTensors(path, {{"a", DType::F32, {2, 3}, a.data()},
                                      {"b", DType::F16, {2}, b.data()},
                                      {"c", DType::I32, {1}, c.data()}})
                  .ok());
  auto f = SafeTensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors().size(), 3u);
  const TensorView *ta = (*f)->find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> got(6);
  ta->toFloat(got.data());
  EXPECT_EQ(got, a);
  std::vector<float> half(2);
  (*f)->find("b")->toFloat(half.data());
  EXPECT_EQ(half, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ((*f)->find("missing"), nullptr);
}

TEST(SafeTensors, TheWriterLeavesNoTemporaryFiles) {
  test::TempDir dir;
  float x = 1;
  ASSERT_TRUE(
      writeSafeTensors(dir.file("y.safetensors"), {{"x", DType::F32, {1}, &x}})
          .ok());
  int files = 0;
  for (auto &e : std::filesystem::directory_iterator(dir.file("")))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(writeSafeTensors(dir.file("no/such/dir/z.safetensors"),
                                {{"x", DType::F32, {1}, &x}})
                   .ok());
}

TEST(SafeTensors, ReadsMetadataAndEmptyTensors) {
  test::TempDir dir;
  EXPECT_EQ(
      openError(
          dir, safetensorsBytes(
                   R"({"__metadata__":{"format":"pt"},)"
                   R"("e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})",
                   "")),
      "ok");
}

TEST(SafeTensors, RejectsEveryDefect) {
  test::TempDir dir;
  EXPECT_EQ(openError(dir, "abc"),
            "file is 3 bytes, too short for a safetensors header");
  EXPECT_EQ(
      openError(dir, std::string("\xff\x00\x00\x00\x00\x00\x00\x00", 8) + "{}"),
      "header length 255 runs past the end of the file (10 bytes)");
  EXPECT_EQ(openError(dir, kEightBytes),
            "header length 72340172838076673 runs past the end of the file "
            "(8 bytes)");
  EXPECT_EQ(openError(dir, safetensorsBytes("{\"a\":", ""))
                .rfind("header is not valid JSON: ", 0),
            0u);
  EXPECT_EQ(openError(dir, safetensorsBytes("[]", "")),
            "header is not a JSON object");
  EXPECT_EQ(openError(dir, safetensorsBytes(R"({"a":1})", "")),
            "tensor 'a' is not a JSON object");
  EXPECT_EQ(openError(dir, safetensorsBytes(R"({"a":{"dtype":"F32"}})", "")),
            "tensor 'a' lacks dtype, shape or data_offsets");
  EXPECT_EQ(
      openError(
          dir,
          safetensorsBytes(
              R"({"a":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})",
              "x")),
      "tensor 'a': unsupported dtype 'F8_E5M2' (kiln reads F32, F16, BF16, "
      "I32, I64, U8)");
  EXPECT_EQ(
      openError(
          dir, safetensorsBytes(
                   R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                   "abcd")),
      "tensor 'a': shape holds a value that is not a non-negative integer");
  EXPECT_EQ(
      openError(dir,
                safetensorsBytes(
                    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                    "abcd")),
      "tensor 'a': shape [2] of F32 needs 8 bytes, data_offsets give 4");
  EXPECT_EQ(
      openError(dir,
                safetensorsBytes(
                    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                    "abcd")),
      "tensor 'a': byte range [0, 8) lies outside the data section (4 "
      "bytes)");
  EXPECT_EQ(
      openError(dir,
                safetensorsBytes(
                    R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",
                    "abcd")),
      "tensor 'a': data_offsets [4, 0) run backwards");
  EXPECT_EQ(
      openError(dir,
                safetensorsBytes(
                    R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})",
                    "abcd")),
      "tensor 'a': data_offsets is not a pair of non-negative integers");
  EXPECT_EQ(
      openError(dir,
                safetensorsBytes(
                    R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
                    "abcdef")),
      "tensors 'a' and 'b' overlap in the data section");
  // A shape whose byte count overflows 64 bits must not wrap around.
  EXPECT_EQ(
      openError(
          dir,
          safetensorsBytes(
              R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
              ""))
          .rfind("tensor 'a': shape [", 0),
      0u);
}

TEST(SafeTensors, MissingFile) {
  auto f = SafeTensorsFile::open("/nonexistent/model.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            "/nonexistent/model.safetensors: No such file or directory");
}
