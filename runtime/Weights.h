//===- Weights.h - the safetensors files of a model folder ------*- C++ -*-===//
#ifndef KILN_RUNTIME_WEIGHTS_H
#define KILN_RUNTIME_WEIGHTS_H

#include "runtime/SafeTensors.h"

#include "absl/status/statusor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// What a compiled model expects of one weight.
struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
};

/// Every tensor of a Hugging Face model folder: `model.safetensors`, or the
/// shards that `model.safetensors.index.json` names. Files stay mapped.
class WeightSet {
public:
  /// True when the folder holds weights at all (either layout).
  static bool present(const std::string &folder);
  static absl::StatusOr<std::unique_ptr<WeightSet>>
  open(const std::string &folder);

  /// nullptr when no file holds the tensor.
  const TensorView *find(const std::string &name) const;
  /// Checks that every spec is present, floating point and of its shape.
  absl::Status check(const std::vector<WeightSpec> &specs) const;
  /// The file (or index) that errors about missing tensors name.
  const std::string &origin() const { return origin_; }

private:
  std::string origin_;
  std::vector<std::unique_ptr<SafeTensorsFile>> files_;
  std::map<std::string, const TensorView *> byName_;
};

} // namespace kiln

#endif // KILN_RUNTIME_WEIGHTS_H
