//===- BundleDevice.h - the device a bundle runs on -------------*- C++ -*-===//
//
// What kiln-run, kiln run and the server open for a bundle: the emu or
// cuda device with its weights, or for a split bundle (kiln compile --tp)
// its ranks as threads of this process (TensorParallelDevice). Ranks as
// processes go through runtime/ProcessRanks.h.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_BUNDLEDEVICE_H
#define KILN_RUNTIME_BUNDLEDEVICE_H

#include "runtime/Bundle.h"
#include "runtime/PlanDevice.h"

namespace kiln {

/// `b` on `device` ("emu" or "cuda"); a single rank's Program is moved out
/// of `b`.
absl::StatusOr<std::unique_ptr<PlanDevice>>
openBundleDevice(Bundle &b, const std::string &device,
                 const WeightProvider &weights);

} // namespace kiln

#endif // KILN_RUNTIME_BUNDLEDEVICE_H
