//===- Nvrtc.h - CUDA C++ to CUBIN and PTX, NVRTC opened at run time -*- C++
//-*-===//
//
// Both sides compile with NVRTC: the compiler ahead of time (codegen/,
// through the kernel cache) and the cuda device when a bundle has neither
// the GPU's CUBIN nor an older PTX. libnvrtc is opened with dlopen, like
// the driver, so neither kiln nor kiln-run needs it to start.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CUDA_NVRTC_H
#define KILN_RUNTIME_CUDA_NVRTC_H

#include "runtime/Program.h"

#include "absl/status/statusor.h"

#include <string>
#include <vector>

namespace kiln {

/// What NVRTC made of one kernel for one target.
struct NvrtcOutput {
  std::string cubin, ptx, log;
};

/// NVRTC's version, "13.0"; an error when libnvrtc cannot be opened.
absl::StatusOr<std::string> nvrtcVersion();

/// The options kiln compiles with for `target` ("sm_90"): part of what a
/// kernel cache key hashes. $KILN_CUDA_INCLUDE overrides where cuda_fp16.h
/// is found.
std::vector<std::string> nvrtcOptions(const std::string &target);

/// Compiles one kernel. A failure names the kernel, its provenance and the
/// target, and carries NVRTC's log.
absl::StatusOr<NvrtcOutput> nvrtcCompile(const KernelCode &kernel,
                                         const std::string &target);

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_NVRTC_H
