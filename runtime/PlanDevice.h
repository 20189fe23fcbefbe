//===- PlanDevice.h - a device that runs a Program's plans ------*- C++ -*-===//
//
// What the emu and cuda devices share: a decode step and a prefill (the
// bucket that holds the prompt, padded; chunks of the largest bucket for a
// longer one) as the Program plans them, the step's inputs staged on the
// host (tokens, positions, count, sampling), and the weight buffers packed
// as the manifest says. A backend moves the inputs in, runs launches
// (kernels and GEMMs) and reads results out.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PLANDEVICE_H
#define KILN_RUNTIME_PLANDEVICE_H

#include "runtime/Device.h"
#include "runtime/Program.h"
#include "runtime/Weights.h"

namespace kiln {

/// Where a device's weight buffers come from: a checkpoint, packed as the
/// manifest says (sources stacked, the norm weight folded into the columns
/// in f32, stored as f16), or seeded random values for a model's shapes
/// alone (--random-weights, for benchmarks): uniform in +-1/sqrt(cols), so
/// that activations stay in range through the layers.
class WeightProvider {
public:
  static WeightProvider checkpoint(const WeightSet &weights) {
    return WeightProvider(&weights, 0);
  }
  static WeightProvider random(uint32_t seed) {
    return WeightProvider(nullptr, seed);
  }
  bool isRandom() const { return weights_ == nullptr; }
  /// One buffer, [rows, cols] f16 bits.
  absl::StatusOr<std::vector<uint16_t>> pack(const WeightBuffer &w) const;
  /// `count` random f16 values of a buffer with `cols` columns, from
  /// element `first` of the stream `stream`.
  std::vector<uint16_t> randomValues(uint32_t stream, int64_t first,
                                     int64_t count, int64_t cols) const;

private:
  WeightProvider(const WeightSet *weights, uint32_t seed)
      : weights_(weights), seed_(seed) {}
  const WeightSet *weights_;
  uint32_t seed_;
};

/// Rows of a weight buffer: its sources' rows (a [cols] source is one).
int64_t weightRows(const WeightBuffer &w);

class PlanDevice : public Device {
public:
  absl::StatusOr<std::vector<float>>
  prefill(std::span<const int32_t> tokens,
          std::span<const int32_t> positions) override;
  absl::StatusOr<std::vector<float>> decode(int32_t token,
                                            int32_t position) override;
  void setSampling(const SamplingParams &params) override {
    sampling_ = params;
  }

protected:
  explicit PlanDevice(Program program);

  /// Sends the staged step inputs (tokens_, positions_ for `rows` rows,
  /// count_, sampling_) to the device.
  virtual absl::Status sendInputs(int64_t rows) = 0;
  /// Runs the launches in order.
  virtual absl::Status run(const std::vector<Launch> &launches) = 0;
  /// Zeroes the sampling history (Region::History): a new sequence.
  virtual absl::Status clearHistory() = 0;
  /// Reads `floats` f32 logits at arena offset `offset`.
  virtual absl::Status readLogits(int64_t offset, float *out,
                                  size_t floats) = 0;

  Program program_;
  // The step's inputs: a row per token of the largest prefill bucket.
  std::vector<int32_t> tokens_, positions_;
  int32_t count_ = 0;
  SamplingParams sampling_;

private:
  absl::Status checkPositions(std::span<const int32_t> positions) const;
};

} // namespace kiln

#endif // KILN_RUNTIME_PLANDEVICE_H
