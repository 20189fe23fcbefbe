//===- LoraAdapter.h - a PEFT LoRA adapter folder ---------------*- C++ -*-===//
//
// A LoRA adapter as Hugging Face's peft saves it (save_pretrained): a
// folder with adapter_config.json (peft_type LORA, r, lora_alpha,
// target_modules, use_rslora, ...) and adapter_model.safetensors, whose
// tensors are `base_model.model.<module>.lora_A.weight` [r, in] and
// `.lora_B.weight` [out, r] of each adapted projection. kiln merges it
// into the weights at load (WeightSet::mergeLora), before any
// quantization: W + weight * scaling * B A, scaling = lora_alpha / r
// (lora_alpha / sqrt(r) with use_rslora), as peft's merge does.
// docs/lora.md says what is refused and why.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_LORAADAPTER_H
#define KILN_RUNTIME_LORAADAPTER_H

#include "runtime/SafeTensors.h"
#include "runtime/Weights.h"

#include "absl/status/statusor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct LoraAdapter {
  std::string folder;
  double weight = 1.0; // --lora FOLDER:WEIGHT
  int64_t rank = 0;
  double alpha = 0;
  bool rslora = false;
  /// The factor peft multiplies B A by.
  double scaling() const;

  /// A [r, in] and B [out, r] of one adapted projection.
  struct Pair {
    const TensorView *a = nullptr, *b = nullptr;
  };
  /// By the base weight's name ("model.layers.0.self_attn.q_proj.weight").
  std::map<std::string, Pair> modules;
  std::shared_ptr<SafeTensorsFile> file;

  /// `spec` is FOLDER or FOLDER:WEIGHT (a number, --lora's spelling).
  /// Errors name the folder or file and the fault: a config that is not
  /// LoRA (DoRA, another peft type, biases, saved modules, rank or alpha
  /// patterns), a target module Llama 2 has not, a tensor that is not an A
  /// or B of a projection, an A without its B, a rank that is not r.
  static absl::StatusOr<LoraAdapter> open(const std::string &spec);
};

/// Merges the adapters into the projections they adapt, in order:
/// W + weight * scaling * B A, computed in f32 and stored in W's float type
/// (f32 for a ggml block type read as floats), B's rows of q_proj and
/// k_proj put in Meta's interleaved order for a GGUF or llama2.c
/// checkpoint (heads of headDim rows). Fails, naming the adapter, for a
/// weight stored pre-quantized or absent, or A and B whose shapes do not
/// fit it.
absl::Status mergeLora(WeightSet &weights,
                       const std::vector<LoraAdapter> &adapters,
                       int64_t headDim);

} // namespace kiln

#endif // KILN_RUNTIME_LORAADAPTER_H
