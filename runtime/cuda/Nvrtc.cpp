//===- Nvrtc.cpp ----------------------------------------------------------===//
#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/OpenLibrary.h"

#include "absl/strings/str_cat.h"

#include <nvrtc.h>

#include <dlfcn.h>

#include <cstdlib>

namespace kiln {
namespace {
// Every NVRTC function kiln calls: (member, declaration in nvrtc.h).
#define KILN_NVRTC_FUNCTIONS(X)                                                \
  X(version, nvrtcVersion)                                                     \
  X(createProgram, nvrtcCreateProgram)                                         \
  X(compileProgram, nvrtcCompileProgram)                                       \
  X(destroyProgram, nvrtcDestroyProgram)                                       \
  X(getProgramLogSize, nvrtcGetProgramLogSize)                                 \
  X(getProgramLog, nvrtcGetProgramLog)                                         \
  X(getCUBINSize, nvrtcGetCUBINSize)                                           \
  X(getCUBIN, nvrtcGetCUBIN)                                                   \
  X(getPTXSize, nvrtcGetPTXSize)                                               \
  X(getPTX, nvrtcGetPTX)                                                       \
  X(getErrorString, nvrtcGetErrorString)

struct NvrtcApi {
#define KILN_MEMBER(member, function) decltype(&::function) member;
  KILN_NVRTC_FUNCTIONS(KILN_MEMBER)
#undef KILN_MEMBER
};

/// Opened once (runtime/cuda/OpenLibrary.h).
absl::StatusOr<const NvrtcApi *> api() {
  static absl::StatusOr<const NvrtcApi *> nvrtc =
      []() -> absl::StatusOr<const NvrtcApi *> {
    auto opened =
        openCudaLibrary("NVRTC", "libnvrtc",
                        {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
                        /*inToolkit=*/true);
    if (!opened.ok())
      return opened.status();
    void *lib = *opened;
    static NvrtcApi a;
#define KILN_LOOKUP(member, function)                                          \
  a.member = reinterpret_cast<decltype(a.member)>(dlsym(lib, #function));      \
  if (!a.member)                                                               \
    return absl::FailedPreconditionError("NVRTC: libnvrtc has no " #function);
    KILN_NVRTC_FUNCTIONS(KILN_LOOKUP)
#undef KILN_LOOKUP
    return &a;
  }();
  return nvrtc;
}

std::string cudaInclude() {
  if (const char *dir = std::getenv("KILN_CUDA_INCLUDE"); dir && *dir)
    return dir;
  return KILN_CUDA_INCLUDE_DIR;
}
} // namespace

absl::StatusOr<std::string> nvrtcVersion() {
  auto a = api();
  if (!a.ok())
    return a.status();
  int major = 0, minor = 0;
  (*a)->version(&major, &minor);
  return absl::StrCat(major, ".", minor);
}

std::vector<std::string> nvrtcOptions(const std::string &target) {
  return {"--gpu-architecture=" + target, "-std=c++17",
          "--include-path=" + cudaInclude(), "--ptxas-options=-v", "-lineinfo"};
}

absl::StatusOr<NvrtcOutput> nvrtcCompile(const KernelCode &kernel,
                                         const std::string &target) {
  auto a = api();
  if (!a.ok())
    return a.status();
  const NvrtcApi &n = **a;
  NvrtcOutput out;
  nvrtcProgram prog;
  std::string file = kernel.entry + ".cu";
  if (n.createProgram(&prog, kernel.source.c_str(), file.c_str(), 0, nullptr,
                      nullptr) != NVRTC_SUCCESS)
    return absl::InternalError(
        absl::StrCat("kernel ", kernel.name, ": nvrtcCreateProgram failed"));
  std::vector<std::string> options = nvrtcOptions(target);
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  nvrtcResult result = n.compileProgram(prog, int(argv.size()), argv.data());
  size_t size = 0;
  n.getProgramLogSize(prog, &size);
  out.log.resize(size);
  if (size)
    n.getProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
    out.log.pop_back();
  if (result != NVRTC_SUCCESS) {
    n.destroyProgram(&prog);
    return absl::InternalError(absl::StrCat(
        "kernel ", kernel.name, " (", kernel.provenance, ") for ", target,
        ": NVRTC: ", n.getErrorString(result), "\n", out.log));
  }
  n.getCUBINSize(prog, &size);
  out.cubin.resize(size);
  n.getCUBIN(prog, out.cubin.data());
  if (n.getPTXSize(prog, &size) == NVRTC_SUCCESS && size) {
    out.ptx.resize(size);
    n.getPTX(prog, out.ptx.data());
  }
  n.destroyProgram(&prog);
  return out;
}

} // namespace kiln
