//===- EmuCompilerTest.cpp - the emu kernels' compile and its cache -------===//
//
// The emu device compiles each kernel with the host compiler against a
// precompiled cuda_emu.h kept in the cache: it is made once, a damaged one
// costs no kernel, and a kernel that does not compile still says why.
//
//===----------------------------------------------------------------------===//
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace kiln {
namespace {
namespace fs = std::filesystem;

// out[i] = i * SCALE over one block: SCALE makes each source another kernel.
std::string scaleKernel(int scale) {
  return "extern \"C\" __global__ void scale(int *out) {\n"
         "  out[threadIdx.x] = (int)threadIdx.x * " +
         std::to_string(scale) + ";\n}\n";
}

/// KILN_EMU_CACHE pointed at a fresh folder for one test, then restored.
class EmuCompilerTest : public testing::Test {
protected:
  void SetUp() override {
    if (const char *old = std::getenv("KILN_EMU_CACHE"))
      saved = old;
    cache = fs::temp_directory_path() /
            ("kiln-emu-compiler-test-" + std::to_string(::getpid()));
    fs::remove_all(cache);
    setenv("KILN_EMU_CACHE", cache.c_str(), 1);
  }
  void TearDown() override {
    if (saved.empty())
      unsetenv("KILN_EMU_CACHE");
    else
      setenv("KILN_EMU_CACHE", saved.c_str(), 1);
    fs::remove_all(cache);
  }
  /// The precompiled headers in the cache (`pch-*/cuda_emu.h.gch`).
  std::vector<fs::path> precompiled() const {
    std::vector<fs::path> found;
    for (const auto &e : fs::recursive_directory_iterator(cache))
      if (e.path().filename() == "cuda_emu.h.gch")
        found.push_back(e.path());
    return found;
  }
  /// Compiles scaleKernel(scale) and checks what it computes.
  void runScale(int scale) {
    auto fns =
        compileEmuKernels({{"scale", "scale", scaleKernel(scale), "test", 1}});
    ASSERT_TRUE(fns.ok()) << fns.status();
    std::vector<int> out(8, -1); // [thread]
    void *args[] = {out.data()};
    (*fns)[0](1, 1, 1, 8, args);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(out[i], i * scale) << "thread " << i;
  }
  fs::path cache;
  std::string saved;
};

TEST_F(EmuCompilerTest, PrecompilesTheHeaderOnceForEveryKernel) {
  runScale(2);
  auto pch = precompiled();
  ASSERT_EQ(pch.size(), 1u) << "no precompiled cuda_emu.h in " << cache;
  const auto made = fs::last_write_time(pch[0]);
  runScale(3); // another kernel, the same header
  ASSERT_EQ(precompiled().size(), 1u);
  EXPECT_EQ(fs::last_write_time(pch[0]), made);
}

TEST_F(EmuCompilerTest, ARunThatFindsItsKernelsPrecompilesNothing) {
  runScale(2);
  ASSERT_EQ(precompiled().size(), 1u);
  fs::remove_all(precompiled()[0].parent_path());
  runScale(2); // from the cache
  EXPECT_TRUE(precompiled().empty());
}

TEST_F(EmuCompilerTest, ADamagedPrecompiledHeaderCostsNoKernel) {
  runScale(2);
  auto pch = precompiled();
  ASSERT_EQ(pch.size(), 1u);
  std::ofstream(pch[0], std::ios::trunc) << "not a precompiled header";
  // GCC passes over it to the header; Clang refuses it, so the kernel
  // compiles again without it and the damaged file goes.
  runScale(5);
}

TEST_F(EmuCompilerTest, AKernelThatDoesNotCompileSaysWhy) {
  auto fns = compileEmuKernels(
      {{"broken", "broken",
        "extern \"C\" __global__ void broken(int *out) { out[0] = nope; }\n",
        "test", 1}});
  ASSERT_FALSE(fns.ok());
  EXPECT_NE(fns.status().message().find("the host compiler failed"),
            std::string::npos)
      << fns.status();
  EXPECT_NE(fns.status().message().find("nope"), std::string::npos)
      << fns.status();
}

} // namespace
} // namespace kiln
