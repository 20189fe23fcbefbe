//===- EmuDevice.h - generated kernels on the CPU ---------------*- C++ -*-===//
#ifndef KILN_RUNTIME_EMUDEVICE_H
#define KILN_RUNTIME_EMUDEVICE_H

#include "runtime/HostCollective.h"
#include "runtime/PlanDevice.h"
#include "runtime/emu/EmuCompiler.h"

#include <map>
#include <memory>

namespace kiln {

/// Runs a Program's kernels (the very CUDA C++ that NVRTC compiles) on the
/// CPU, with the same buffers a GPU would have: the f16 weight buffers the
/// manifest describes, the activation arena, the paged KV pool. The plan's
/// cuBLAS GEMMs are the cuda device's very calls (runtime/BlasMatmul.h), run
/// by a host stand-in with cuBLAS's numbers (f16 in, fp32 accumulation, D
/// rounded once). The step's inputs are the staged host arrays
/// themselves.
class EmuDevice : public PlanDevice {
public:
  static absl::StatusOr<std::unique_ptr<EmuDevice>>
  create(Program program, const WeightProvider &weights);

  std::string name() const override { return "emu"; }
  /// Rank `rank` of a split model: its plans' collectives meet the other
  /// ranks' in `collective` (which outlives the device).
  void joinCollective(HostCollective *collective, int rank) {
    collective_ = collective;
    rank_ = rank;
  }

private:
  explicit EmuDevice(Program program) : PlanDevice(std::move(program)) {}
  // The kernels read and write the staged host arrays themselves.
  absl::Status sendInputs(int64_t) override { return absl::OkStatus(); }
  absl::Status sendTables() override { return absl::OkStatus(); }
  absl::Status readSampled(int64_t) override { return absl::OkStatus(); }
  absl::Status run(const std::vector<Launch> &launches) override;
  // The kernels read logitBias_ itself.
  absl::Status sendLogitBias(int32_t) override { return absl::OkStatus(); }
  absl::Status clearHistory(int32_t seq) override {
    std::fill_n(history_.begin() + int64_t(seq) * program_.vocab,
                program_.vocab, 0);
    return absl::OkStatus();
  }
  absl::Status readLogits(int64_t offset, float *out, size_t floats) override;
  void *address(const Argument &a);

  std::vector<EmuLaunchFn> kernels_;
  // Each plan's launches as a fault names them (by plan).
  std::map<const std::vector<Launch> *, std::vector<std::string>> launchNames_;
  std::map<std::string, std::vector<uint8_t>> weights_; // pack()s bytes
  std::vector<uint8_t> arena_, pool_;
  std::vector<float> workspace_;
  std::vector<uint16_t> dequantized_; // [n, k] f16: Region::Dequantized
  std::vector<uint32_t> counters_;
  std::vector<int32_t> history_; // [sequences, V]
  HostCollective *collective_ = nullptr;
  int rank_ = 0;
};

} // namespace kiln

#endif // KILN_RUNTIME_EMUDEVICE_H
