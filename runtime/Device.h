//===- Device.h - what every kiln device runs -------------------*- C++ -*-===//
#ifndef KILN_RUNTIME_DEVICE_H
#define KILN_RUNTIME_DEVICE_H

#include "runtime/Sampling.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln {

/// One sequence's forward passes on some device (ref, emu, cuda). The device
/// owns the sequence's KV cache; positions say where each token goes in it.
class Device {
public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  /// Runs tokens[S] at positions[S]; returns logits [S, V] row-major.
  virtual absl::StatusOr<std::vector<float>>
  prefill(std::span<const int32_t> tokens,
          std::span<const int32_t> positions) = 0;
  /// Runs one token at one position; returns logits [V].
  virtual absl::StatusOr<std::vector<float>> decode(int32_t token,
                                                    int32_t position) = 0;
  /// The token the device sampled after the last step, when it samples
  /// (by the rule of `setSampling`, from the last logits row).
  virtual std::optional<int32_t> sampledToken() const { return std::nullopt; }
  /// How the next steps sample (a device that does not sample ignores it).
  virtual void setSampling(const SamplingParams &) {}
  /// The logit bias the next steps sample with, when the params say
  /// `biased` (a device that does not sample ignores it).
  virtual absl::Status setLogitBias(const LogitBias &) {
    return absl::OkStatus();
  }
};

} // namespace kiln

#endif // KILN_RUNTIME_DEVICE_H
