//===- RefDevice.h - the fp32 reference interpreter of kiln IR --*- C++ -*-===//
//
// The `ref` device runs kiln IR directly, op by op, in float32, whatever the
// storage type in the IR says. It is the executable meaning of the dialect:
// slow, simple, and checked against Meta's logits. It interprets MLIR, so it
// lives on the compiler side; the runtime library stays free of MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_REFERENCE_REFDEVICE_H
#define KILN_REFERENCE_REFDEVICE_H

#include "ir/KilnOps.h"
#include "runtime/Device.h"
#include "runtime/KVCacheQuant.h"
#include "runtime/Weights.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

struct RefOptions {
  /// W8A8 (quant-gemm=2, the FP8 GEMM): @prefill's matmuls of fp8 weights
  /// take their input rounded to e4m3 a row at a time
  /// (runtime/ActivationQuant.h), as the model sees it (normalized and
  /// times the norm weight); @decode's do not.
  bool fp8Activations = false;
};

class RefDevice : public Device {
public:
  /// `module` must hold @prefill and @decode; `weights` must already have
  /// passed WeightSet::check against collectWeights(module). A quantized
  /// weight runs as its format's values: a pre-quantized module's (GPTQ,
  /// AWQ) dequantized exactly, a float weight's after round to nearest.
  static absl::StatusOr<std::unique_ptr<RefDevice>>
  create(mlir::ModuleOp module, const WeightSet &weights,
         RefOptions options = {});

  std::string name() const override { return "ref"; }
  absl::StatusOr<std::vector<float>>
  prefill(std::span<const int32_t> tokens,
          std::span<const int32_t> positions) override;
  absl::StatusOr<std::vector<float>> decode(int32_t token,
                                            int32_t position) override;

  /// Runs one function of the module; returns its logits [S, V].
  absl::StatusOr<std::vector<float>> run(llvm::StringRef function,
                                         std::span<const int32_t> tokens,
                                         std::span<const int32_t> positions);

private:
  RefDevice(mlir::ModuleOp module, RefOptions options)
      : module_(module), options_(options) {}
  /// A checkpoint tensor of `shape` in float32; a weight the checkpoint
  /// stores pre-quantized (GPTQ, AWQ) is its module dequantized exactly.
  using LoadFn =
      std::function<absl::StatusOr<std::shared_ptr<const std::vector<float>>>(
          const std::string &name, const std::vector<int64_t> &shape)>;
  /// Builds a packed weight as its op says: sources stacked, norm folded.
  absl::Status pack(PackedWeightOp op, const LoadFn &load);

  mlir::ModuleOp module_;
  RefOptions options_;
  /// Every weight the module names, converted to float32 once.
  std::map<std::string, std::shared_ptr<const std::vector<float>>> weights_;
  /// The weights loaded from pre-quantized modules: already the quantized
  /// model's values, which a round trip would move.
  std::set<std::string> prequantized_;
  /// Every quantized kiln.weight, dequantized, by its name.
  std::map<std::string, std::shared_ptr<const std::vector<float>>> quantized_;
  /// Every packed weight, by its name.
  std::map<std::string, std::shared_ptr<const std::vector<float>>> packed_;
  /// With fp8Activations, a packed fp8 weight whose norm is folded in: the
  /// weight before the fold [N, K] and the norm weight [K], by its name
  /// (the input is rounded after the norm weight multiplies it).
  std::map<std::string, std::pair<std::vector<float>, std::vector<float>>>
      unfolded_;
  /// The sequence's KV cache: per layer, [capacity, kv_heads*head_dim].
  std::vector<std::vector<float>> keys_, values_;
  int64_t capacity_ = 0, slotWidth_ = 0, headDim_ = 0;
  /// A quantized cache's codes: each written head is rounded as it stores.
  std::optional<KVCodes> kvCodes_;
};

} // namespace kiln

#endif // KILN_REFERENCE_REFDEVICE_H
