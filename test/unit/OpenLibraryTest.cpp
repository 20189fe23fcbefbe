#include "runtime/cuda/OpenLibrary.h"
#include "TestFiles.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

namespace kiln {
namespace {

/// Sets an environment variable for one test.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

TEST(OpenLibrary, FindsALibraryInTheToolkitFolderOfCudaHome) {
  // A toolkit whose lib64 the dynamic linker's path does not hold: a copy
  // of a library every Linux has, under a name nothing else has.
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("lib64"));
  // libm's path as the dynamic linker found it (not dladdr of a libc
  // function: under ASan that names the test's own executable).
  void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(libm, nullptr);
  link_map *map = nullptr;
  ASSERT_EQ(dlinfo(libm, RTLD_DI_LINKMAP, &map), 0);
  std::filesystem::copy_file(map->l_name,
                             dir.file("lib64/libkiln-test-only.so.1"));
  dlclose(libm);
  ScopedEnv home("CUDA_HOME", dir.file(""));
  auto found = openCudaLibrary("test", "the test library",
                               {"libkiln-test-only.so.1"}, true);
  ASSERT_TRUE(found.ok()) << found.status();
  // Not in the toolkit (the driver): only the linker's path counts.
  auto driver = openCudaLibrary("cuda device", "the CUDA driver",
                                {"libkiln-test-only.so.1"}, false);
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().message().find("also looked in"),
            std::string::npos);
}

TEST(OpenLibrary, NamesTheLibraryAndWhereItLooked) {
  ScopedEnv home("CUDA_HOME", "/nonexistent-cuda");
  auto missing =
      openCudaLibrary("NVRTC", "libnvrtc", {"libkiln-none.so.9"}, true);
  ASSERT_FALSE(missing.ok());
  std::string message(missing.status().message());
  EXPECT_EQ(
      message.rfind("NVRTC: cannot open libnvrtc: libkiln-none.so.9: ", 0), 0u)
      << message;
  EXPECT_NE(message.find("(also looked in /nonexistent-cuda/lib64, "),
            std::string::npos)
      << message;
}

} // namespace
} // namespace kiln
