//===- OpenLibrary.cpp ----------------------------------------------------===//
#include "runtime/cuda/OpenLibrary.h"

#include "absl/strings/str_cat.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln {

absl::StatusOr<void *>
openCudaLibrary(const char *prefix, const char *what,
                std::initializer_list<const char *> sonames, bool inToolkit) {
  std::vector<std::string> folders; // the toolkit's lib64, where it may be
  if (inToolkit) {
    for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
      if (const char *root = std::getenv(variable); root && *root)
        folders.push_back(std::string(root) + "/lib64");
    folders.push_back("/usr/local/cuda/lib64");
    folders.push_back(KILN_CUDA_LIBRARY_DIR);
  }

  std::string firstError;
  auto attempt = [&](const std::string &name) -> void * {
    void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle && firstError.empty())
      if (const char *e = dlerror())
        firstError = e;
    return handle;
  };
  for (const char *soname : sonames)
    if (void *handle = attempt(soname))
      return handle;
  for (const std::string &folder : folders)
    for (const char *soname : sonames)
      if (void *handle = attempt(folder + "/" + soname))
        return handle;
  std::string also;
  for (const std::string &folder : folders)
    absl::StrAppend(&also, also.empty() ? " (also looked in " : ", ", folder);
  return absl::FailedPreconditionError(
      absl::StrCat(prefix, ": cannot open ", what, ": ", firstError, also,
                   also.empty() ? "" : ")"));
}

} // namespace kiln
