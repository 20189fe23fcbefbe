//===- EmuDevice.h - the emu device: generated kernels on the CPU -*- C++
//-*-===//
#ifndef KILN_RUNTIME_EMUDEVICE_H
#define KILN_RUNTIME_EMUDEVICE_H

#include "runtime/Device.h"
#include "runtime/Program.h"
#include "runtime/Weights.h"
#include "runtime/emu/EmuCompiler.h"

#include <map>
#include <memory>

namespace kiln {

/// Runs a Program's kernels (the very CUDA C++ that NVRTC compiles) on the
/// CPU, with the same buffers a GPU would have: the f16 weight buffers the
/// manifest describes, the activation arena, the paged KV pool. The plan's
/// cuBLAS GEMMs run as a host matmul with cuBLAS's numbers (f16 in, fp32
/// accumulation, f32 out).
class EmuDevice : public Device {
public:
  static absl::StatusOr<std::unique_ptr<EmuDevice>>
  create(Program program, const WeightSet &weights);

  std::string name() const override { return "emu"; }
  absl::StatusOr<std::vector<float>>
  prefill(std::span<const int32_t> tokens,
          std::span<const int32_t> positions) override;
  absl::StatusOr<std::vector<float>> decode(int32_t token,
                                            int32_t position) override;
  /// The token the decode step's argmax kernel chose.
  std::optional<int32_t> sampledToken() const override { return sampled_[0]; }
  void setSampling(const SamplingParams &params) override {
    sampling_ = params;
  }

private:
  void *address(const Argument &a);
  void run(const std::vector<Launch> &launches);
  static void gemm(const GemmShape &s, const uint16_t *a, const uint16_t *w,
                   float *c);

  Program program_;
  std::vector<EmuLaunchFn> kernels_;
  std::map<std::string, std::vector<uint16_t>> weights_; // f16 bits
  std::vector<uint8_t> arena_, pool_;
  std::vector<int32_t> tokens_, positions_, blockTable_; // [rows], [blocks]
  std::vector<int32_t> sampled_{0}, count_{0};           // [1]
  std::vector<float> workspace_;
  std::vector<uint32_t> counters_;
  SamplingParams sampling_;
};

} // namespace kiln

#endif // KILN_RUNTIME_EMUDEVICE_H
