//===- Nvrtc.h - CUDA C++ to CUBIN and PTX with NVRTC -----------*- C++ -*-===//
#ifndef KILN_CODEGEN_NVRTC_H
#define KILN_CODEGEN_NVRTC_H

#include "runtime/Program.h"
#include "runtime/cuda/Nvrtc.h"

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
  int64_t staticSharedBytes = 0;         // a block's, as ptxas declares it
};

/// ptxas -v's report in k.log: "Used 40 registers, N bytes smem" and "N
/// bytes spill stores, M bytes spill loads".
void readPtxasReport(CompiledKernel &k);

/// NVRTC's version, "13.0" ("(none)" without libnvrtc).
std::string nvrtcVersionString();

/// Compiles one kernel (runtime/cuda/Nvrtc) and reads ptxas' report. A
/// failure names the kernel and carries NVRTC's log; a kernel whose static
/// and dynamic shared memory pass what `target` lets a block hold
/// (maxSharedPerBlock) fails too, naming both and the way out.
llvm::Expected<CompiledKernel> compileKernel(const KernelCode &kernel,
                                             const std::string &target);

} // namespace kiln

#endif // KILN_CODEGEN_NVRTC_H
