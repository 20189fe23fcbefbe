//===- Nvrtc.h - CUDA C++ to CUBIN and PTX with NVRTC -----------*- C++ -*-===//
#ifndef KILN_CODEGEN_NVRTC_H
#define KILN_CODEGEN_NVRTC_H

#include "runtime/Program.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

/// What NVRTC made of one kernel for one target, with ptxas' figures.
struct CompiledKernel {
  std::string kernel, target; // "decode.attn.norm_qkv_rope", "sm_90"
  std::string cubin, ptx, log;
  int registers = -1;
  int spillStores = -1, spillLoads = -1; // bytes
};

/// NVRTC's version, "13.0".
std::string nvrtcVersionString();

/// The options kiln compiles with for `target` ("sm_90"): part of what a
/// cache key must hash.
std::vector<std::string> nvrtcOptions(const std::string &target);

/// Compiles one kernel. A failure names the kernel and carries NVRTC's log.
llvm::Expected<CompiledKernel> compileKernel(const KernelCode &kernel,
                                             const std::string &target);

} // namespace kiln

#endif // KILN_CODEGEN_NVRTC_H
