//===- QuantizedCheckpoint.h - GPTQ and AWQ checkpoints, read -*- C++ -*-===//
//
// Hugging Face checkpoints that a tool quantized before kiln saw them: GPTQ
// (AutoGPTQ, GPTQModel, optimum; checkpoint_format "gptq" = v1 or "gptq_v2")
// and AWQ (AutoAWQ, version "gemm"). config.json's quantization_config says
// which; each quantized linear module M stores M.qweight, M.qzeros, M.scales
// (and, for GPTQ, M.g_idx) in place of M.weight. readQuantizedLinear converts
// one module exactly into kiln's canonical QuantizedMatrix (QuantFormat.h):
// same codes, zero points and f16 scales, so that every dequantized value is
// the tools' own (q - z) * s (exact in float32; their float16 kernels round
// it once more). docs/quantized-checkpoints.md has the on-disk formats, their
// sources in the tools' code and the mapping.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_QUANTIZEDCHECKPOINT_H
#define KILN_RUNTIME_QUANTIZEDCHECKPOINT_H

#include "runtime/QuantFormat.h"
#include "runtime/Weights.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

enum class QuantMethod { GPTQ, AWQ };

/// The fields of config.json's quantization_config that decide the layout.
struct QuantizationConfig {
  QuantMethod method = QuantMethod::GPTQ;
  int bits = 4;            // 4 or 8 (AWQ: 4)
  int64_t groupSize = 128; // input features per scale; -1: the whole row
  // GPTQ only.
  bool sym = true;      // informative: zeros are stored (and read) either way
  bool descAct = false; // act-order: g_idx is required (and kept when not
                        // the plain c / group_size map)
  bool gptqV2 = false;  // checkpoint_format "gptq_v2": qzeros hold the zero
                        // point; v1 ("gptq") holds zero point - 1
  // AWQ only; readQuantizationConfig accepts true only (GEMM stores zeros).
  bool zeroPoint = true;

  /// "GPTQ" or "AWQ" with the bits: "4-bit GPTQ", for messages.
  std::string describe() const;
  /// The format kiln holds the checkpoint's modules in (#kiln.quant):
  /// int4 or int8, group_size (0 for -1), always with zero points (the
  /// files store them: with them every module is exact, symmetric or not),
  /// and act-order for GPTQ's desc_act.
  QuantFormat format() const;
};

/// config.json's `quantization_config`, parsed and checked: nullopt when the
/// config has none (or null), an InvalidArgumentError naming `path` and the
/// field otherwise (an unknown quant_method, bits other than 4 or 8, a GPTQ
/// checkpoint_format other than "gptq" / "gptq_v2", an AWQ version other
/// than "gemm", ...). `configJson` is the whole config.json text.
absl::StatusOr<std::optional<QuantizationConfig>>
readQuantizationConfig(std::string_view configJson, const std::string &path);

/// Reads `module`'s quantized tensors (`<module>.qweight`, `.qzeros`,
/// `.scales`, GPTQ's `.g_idx`) from `weights` and converts them to canonical
/// form: rows = output features, cols = input features (the matmul's K), as
/// the module's [rows, cols] `.weight` would be. Canonical zeroPoints is true
/// unless every zero point equals the middle code (8 or 128: GPTQ's sym
/// checkpoints); gIdx is kept only when g_idx is not c / group_size.
/// Errors (InvalidArgumentError, one line, naming weights.origin() and the
/// tensor): a missing tensor, a dtype or shape that disagrees with rows,
/// cols, bits and groupSize, a group size that does not divide cols, a g_idx
/// entry outside [0, groups) or a group that does not hold exactly
/// groupSize columns, a v1 zero point that overflows the code range.
absl::StatusOr<QuantizedMatrix>
readQuantizedLinear(const WeightSet &weights, const std::string &module,
                    const QuantizationConfig &cfg, int64_t rows, int64_t cols);

/// readQuantizedLinear's checks alone (the tensors' dtypes and shapes, and
/// g_idx's entries), without converting the codes: what WeightSet::check
/// asks of a module stored pre-quantized.
absl::Status checkQuantizedLinear(const WeightSet &weights,
                                  const std::string &module,
                                  const QuantizationConfig &cfg, int64_t rows,
                                  int64_t cols);

} // namespace kiln

#endif // KILN_RUNTIME_QUANTIZEDCHECKPOINT_H
