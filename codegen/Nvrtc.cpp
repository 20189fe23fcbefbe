//===- Nvrtc.cpp ----------------------------------------------------------===//
#include "codegen/Nvrtc.h"

#include "llvm/Support/Regex.h"

#include <nvrtc.h>

#include <cstdlib>

namespace kiln {
namespace {
/// Where cuda_fp16.h is: NVRTC 13 has no built-in copy. KILN_CUDA_INCLUDE
/// overrides the path CMake found.
std::string cudaInclude() {
  if (const char *dir = std::getenv("KILN_CUDA_INCLUDE"); dir && *dir)
    return dir;
  return KILN_CUDA_INCLUDE_DIR;
}

/// ptxas -v: "Used 40 registers" and "N bytes spill stores, M bytes spill
/// loads" for the kernel.
void readPtxasReport(CompiledKernel &k) {
  llvm::SmallVector<llvm::StringRef> m;
  if (llvm::Regex("Used ([0-9]+) registers").match(k.log, &m))
    m[1].getAsInteger(10, k.registers);
  if (llvm::Regex("([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
          .match(k.log, &m)) {
    m[1].getAsInteger(10, k.spillStores);
    m[2].getAsInteger(10, k.spillLoads);
  }
}
} // namespace

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  ::nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtcOptions(const std::string &target) {
  return {"--gpu-architecture=" + target, "-std=c++17",
          "--include-path=" + cudaInclude(), "--ptxas-options=-v", "-lineinfo"};
}

llvm::Expected<CompiledKernel> compileKernel(const KernelCode &kernel,
                                             const std::string &target) {
  CompiledKernel out;
  out.kernel = kernel.name;
  out.target = target;
  nvrtcProgram prog;
  std::string file = kernel.entry + ".cu";
  if (nvrtcCreateProgram(&prog, kernel.source.c_str(), file.c_str(), 0, nullptr,
                         nullptr) != NVRTC_SUCCESS)
    return llvm::createStringError("kernel " + kernel.name +
                                   ": nvrtcCreateProgram failed");
  std::vector<std::string> options = nvrtcOptions(target);
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  nvrtcResult result = nvrtcCompileProgram(prog, int(argv.size()), argv.data());
  size_t size = 0;
  nvrtcGetProgramLogSize(prog, &size);
  out.log.resize(size);
  if (size)
    nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
    out.log.pop_back();
  if (result != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    return llvm::createStringError(
        "kernel " + kernel.name + " (" + kernel.provenance + ") for " + target +
        ": NVRTC: " + nvrtcGetErrorString(result) + "\n" + out.log);
  }
  nvrtcGetCUBINSize(prog, &size);
  out.cubin.resize(size);
  nvrtcGetCUBIN(prog, out.cubin.data());
  if (nvrtcGetPTXSize(prog, &size) == NVRTC_SUCCESS && size) {
    out.ptx.resize(size);
    nvrtcGetPTX(prog, out.ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  readPtxasReport(out);
  return out;
}

} // namespace kiln
