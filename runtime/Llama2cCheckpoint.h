//===- Llama2cCheckpoint.h - a validating llama2.c reader -------*- C++ -*-===//
//
// Andrej Karpathy's llama2.c checkpoints (docs/llama2c.md), as its
// export.py writes them and run.c / runq.c read them:
//   - version 0 (legacy): 7 int32 (dim, hidden_dim, n_layers, n_heads,
//     n_kv_heads, vocab_size, seq_len; a negative vocab_size means a
//     separate classifier), then fp32 tensors in run.c's order, the RoPE
//     tables freq_cis_real/imag included;
//   - version 1: the "ak42" magic, the version, the 7 int32, a shared
//     classifier byte, zeros to 256 bytes, then fp32 tensors (the norms
//     first);
//   - version 2: as version 1 with an int32 group size after the flag; the
//     norms fp32, every matrix Q8_0 (int8 values, then an fp32 scale per
//     group of the flattened tensor).
// The file is memory-mapped and every field is checked before use, with
// overflow-safe arithmetic; the tensors must fill the file exactly. fp32
// tensors are views into the mapping; version 2's matrices are dequantized
// into owned float buffers (value * scale in f32, as runq.c does): their
// f32 scales do not fit kiln's canonical form (f16 scales, QuantFormat.h).
// Tensors are named as in a Hugging Face checkpoint, q/k rows stay in
// Meta's interleaved RoPE order (the model compiles with
// RopeLayout::interleaved).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_LLAMA2CCHECKPOINT_H
#define KILN_RUNTIME_LLAMA2CCHECKPOINT_H

#include "runtime/MappedFile.h"
#include "runtime/ModelConfig.h"
#include "runtime/SafeTensors.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// The header as the file spells it (run.c's Config and the flags).
struct Llama2cHeader {
  int version = 0; // 0 (legacy), 1 (fp32) or 2 (Q8_0)
  int32_t dim = 0, hiddenDim = 0, nLayers = 0, nHeads = 0, nKvHeads = 0;
  int32_t vocabSize = 0; // as stored: negative in a legacy file = separate
  int32_t seqLen = 0;
  bool sharedClassifier = true;
  int32_t groupSize = 0;    // version 2
  uint64_t headerBytes = 0; // 28 or 256
};

class Llama2cCheckpoint {
public:
  /// Without `tensors`, the header and the file's size are checked but no
  /// tensor is read (version 2's dequantization is the costly part).
  static absl::StatusOr<std::unique_ptr<Llama2cCheckpoint>>
  open(const std::string &path, bool tensors = true);
  ~Llama2cCheckpoint();
  Llama2cCheckpoint(const Llama2cCheckpoint &) = delete;
  Llama2cCheckpoint &operator=(const Llama2cCheckpoint &) = delete;

  const std::string &path() const { return path_; }
  const Llama2cHeader &header() const { return header_; }
  /// The model: eps 1e-5 and rope_theta 10000 as run.c computes, no
  /// classifier of its own when shared (tie_word_embeddings).
  const LlamaConfig &config() const { return config_; }
  /// Every tensor but the RoPE tables, in file order, under its Hugging
  /// Face name (map key); each view's own name is run.c's ("wq[0]").
  const std::map<std::string, TensorView> &tensors() const { return byName_; }
  const TensorView *find(const std::string &name) const;
  /// "llama2.c version 2 (Q8_0, group size 64)": for messages.
  std::string describe() const;

private:
  explicit Llama2cCheckpoint(std::string path) : path_(std::move(path)) {}
  absl::Status parse(bool tensors);

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  const void *map_ = nullptr; // mapping_'s bytes
  uint64_t size_ = 0;
  Llama2cHeader header_;
  LlamaConfig config_;
  std::map<std::string, TensorView> byName_;
  std::vector<std::vector<float>> dequantized_; // version 2: [tensors][elems]
};

} // namespace kiln

#endif // KILN_RUNTIME_LLAMA2CCHECKPOINT_H
