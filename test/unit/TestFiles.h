//===- TestFiles.h - temporary files for unit tests -------------*- C++ -*-===//
#ifndef KILN_TEST_UNIT_TESTFILES_H
#define KILN_TEST_UNIT_TESTFILES_H

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace kiln::test {

/// A fresh folder under the system temp dir, removed with its contents.
class TempDir {
public:
  TempDir() {
    const testing::TestInfo *info =
        testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("kiln-" + std::string(info->test_suite_name()) + "-" +
             info->name() + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string &name) const {
    return (path_ / name).string();
  }

private:
  std::filesystem::path path_;
};

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A safetensors file from a header's JSON text and a data section.
inline std::string safetensorsBytes(const std::string &header,
                                    const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_TESTFILES_H
