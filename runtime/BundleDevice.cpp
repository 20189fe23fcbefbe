//===- BundleDevice.cpp ---------------------------------------------------===//
#include "runtime/BundleDevice.h"

#include "runtime/EmuDevice.h"
#include "runtime/TensorParallelDevice.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaRanks.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<PlanDevice>>
openBundleDevice(Bundle &b, const std::string &device,
                 const WeightProvider &weights) {
  absl::StatusOr<std::unique_ptr<PlanDevice>> out;
  if (b.program.ranks > 1 && device == "emu")
    out = openEmuRanks(b.program, weights.checkpointSet());
  else if (b.program.ranks > 1)
    out = openCudaRanks(b, weights.checkpointSet());
  else if (device == "cuda")
    out = CudaDevice::create(std::move(b.program), b.cubin, b.ptx, b.nvrtc,
                             weights);
  else
    out = EmuDevice::create(std::move(b.program), weights);
  return out;
}

} // namespace kiln
