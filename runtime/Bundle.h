//===- Bundle.h - the compiled model as one file ----------------*- C++ -*-===//
//
// The contract between compiler and runtime (docs/bundle-format.md): the
// Program (kernels, weight manifest, memory plan, launches), the model's
// config, and per target the CUBIN and PTX of every kernel. No weights: they
// stay in the model's safetensors. Readable without MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_BUNDLE_H
#define KILN_RUNTIME_BUNDLE_H

#include "runtime/ModelConfig.h"
#include "runtime/Program.h"

#include "absl/status/statusor.h"

#include <map>
#include <string>

namespace kiln {

/// The bundle format version this kiln writes; it reads only this one.
constexpr int kBundleVersion = 9;

struct Bundle {
  std::string model; // what it was compiled from
  LlamaConfig config;
  Program program;
  /// kernel name -> target ("sm_90") -> bytes.
  std::map<std::string, std::map<std::string, std::string>> cubin, ptx;
  /// The NVRTC version that made them ("13.0"; "" when the bundle does not
  /// say): a driver older than it may refuse them.
  std::string nvrtc;
  /// LoRA adapters to merge into the weights at load ("FOLDER[:WEIGHT]",
  /// FOLDER absolute; runtime/LoraAdapter.h), in order.
  std::vector<std::string> lora = {};
};

/// A region's name in the bundle and in kiln inspect ("arena", "pool", ...).
const char *regionName(Region region);

/// True when `path` is a file that starts like a bundle.
bool looksLikeBundle(const std::string &path);

/// Writes atomically: the whole bundle, or nothing at `path`.
absl::Status writeBundle(const std::string &path, const Bundle &bundle);

/// Reads and checks a bundle; errors name the file and the fault.
absl::StatusOr<Bundle> readBundle(const std::string &path);

} // namespace kiln

#endif // KILN_RUNTIME_BUNDLE_H
