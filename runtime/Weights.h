//===- Weights.h - the safetensors files of a model folder ------*- C++ -*-===//
#ifndef KILN_RUNTIME_WEIGHTS_H
#define KILN_RUNTIME_WEIGHTS_H

#include "runtime/QuantFormat.h"
#include "runtime/SafeTensors.h"

#include "absl/status/statusor.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct QuantizationConfig; // runtime/QuantizedCheckpoint.h

/// What a compiled model expects of one weight.
struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  /// The format the model holds it in (#kiln.quant), when quantized: the
  /// checkpoint then has either `name` in floats (quantized at load) or,
  /// pre-quantized (GPTQ, AWQ), its module's qweight, qzeros, scales (and
  /// g_idx) in this format.
  std::optional<QuantFormat> quant = {};
};

/// Every tensor of a Hugging Face model folder: `model.safetensors`, or the
/// shards that `model.safetensors.index.json` names, and how config.json's
/// quantization_config says they are quantized (GPTQ, AWQ), when it does.
/// Files stay mapped.
class WeightSet {
public:
  /// True when the folder holds weights at all (either layout).
  static bool present(const std::string &folder);
  static absl::StatusOr<std::unique_ptr<WeightSet>>
  open(const std::string &folder);

  /// nullptr when no file holds the tensor.
  const TensorView *find(const std::string &name) const;
  /// Checks that every spec is present, floating point and of its shape,
  /// or (a quantized spec) stored pre-quantized in its format.
  absl::Status check(const std::vector<WeightSpec> &specs) const;
  /// The file (or index) that errors about missing tensors name.
  const std::string &origin() const { return origin_; }

  /// The folder's quantization_config; nullptr when it has none.
  const QuantizationConfig *quantization() const { return quant_.get(); }
  /// True when the weight `name` (`M.weight`) is not in the files but its
  /// module M is, pre-quantized (`M.qweight`, and a quantization_config).
  bool prequantized(const std::string &name) const;
  /// The module of a weight `M.weight`: M.
  static std::string moduleOf(const std::string &name);

private:
  std::string origin_;
  std::shared_ptr<const QuantizationConfig> quant_;
  std::vector<std::unique_ptr<SafeTensorsFile>> files_;
  std::map<std::string, const TensorView *> byName_;
};

} // namespace kiln

#endif // KILN_RUNTIME_WEIGHTS_H
