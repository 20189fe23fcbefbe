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

class GgufFile;          // runtime/GgufFile.h
class Llama2cCheckpoint; // runtime/Llama2cCheckpoint.h

/// Every tensor of a Hugging Face model folder: `model.safetensors`, or the
/// shards that `model.safetensors.index.json` names, and how config.json's
/// quantization_config says they are quantized (GPTQ, AWQ), when it does.
/// Or the tensors of a llama GGUF file, under their Hugging Face names
/// (GgufModel.h), or of a llama2.c checkpoint (Llama2cCheckpoint.h): any
/// other file. Files stay mapped.
class WeightSet {
public:
  /// True when `path` holds weights at all: a folder in either layout, or
  /// a file (GGUF or llama2.c; open() says when it is neither).
  static bool present(const std::string &path);
  static absl::StatusOr<std::unique_ptr<WeightSet>>
  open(const std::string &path);
  WeightSet();
  ~WeightSet();

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
  /// module M is, pre-quantized (`M.qweight`, and a quantization_config);
  /// or, in a GGUF file whose projections share a canonical format, when
  /// `name` is one of them.
  bool prequantized(const std::string &name) const;
  /// A prequantized weight of shape [rows, cols] in canonical form: its
  /// GPTQ/AWQ module (readQuantizedLinear) or its GGUF blocks.
  absl::StatusOr<QuantizedMatrix>
  readQuantized(const std::string &name, int64_t rows, int64_t cols) const;
  /// The GGUF file the weights come from; nullptr for a folder.
  const GgufFile *gguf() const { return gguf_.get(); }
  /// The llama2.c checkpoint the weights come from; nullptr otherwise.
  const Llama2cCheckpoint *llama2c() const { return llama2c_.get(); }
  /// The module of a weight `M.weight`: M.
  static std::string moduleOf(const std::string &name);

  /// True for a GGUF or llama2.c checkpoint, whose q/k rows are in Meta's
  /// interleaved RoPE order.
  bool metaRowOrder() const { return gguf_ || llama2c_; }

  /// New values for the weight `name` (which find() must know), in `dtype`
  /// (a float type), of its shape: find() returns them from now on, under
  /// its name (a merged LoRA adapter: LoraAdapter.h).
  void replace(const std::string &name, DType dtype,
               std::vector<uint8_t> bytes);

private:
  absl::Status openGguf(const std::string &path);
  absl::Status openLlama2c(const std::string &path);

  std::string origin_;
  std::shared_ptr<const QuantizationConfig> quant_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Llama2cCheckpoint> llama2c_;
  // Its projections' formats by Hugging Face name (GgufModel.h); empty
  // when they are read as floats.
  std::map<std::string, QuantFormat> ggufFormats_;
  std::vector<std::unique_ptr<TensorView>> ggufViews_;
  // Replaced weights (replace()): their views and bytes.
  std::vector<std::unique_ptr<TensorView>> replacedViews_;
  std::vector<std::vector<uint8_t>> replacedBytes_;
  std::map<std::string, std::string> unreadable_; // name -> its ggml type
  std::vector<std::unique_ptr<SafeTensorsFile>> files_;
  std::map<std::string, const TensorView *> byName_;
};

} // namespace kiln

#endif // KILN_RUNTIME_WEIGHTS_H
