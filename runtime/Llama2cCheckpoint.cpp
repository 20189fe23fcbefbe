//===- Llama2cCheckpoint.cpp - validating llama2.c reader -----------------===//
#include "runtime/Llama2cCheckpoint.h"
#include "runtime/MappedFile.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unistd.h>

namespace kiln {
namespace {
constexpr uint32_t kMagic = 0x616b3432; // "ak42", export.py's uint32
constexpr uint64_t kLegacyHeader = 28;  // 7 int32
constexpr uint64_t kHeader = 256;       // versions 1 and 2, zero-padded
// No Llama 2 comes near this; it keeps every product of two fields below
// 2^48, so sizes sum without overflow in 128 bits.
constexpr int32_t kMaxField = 1 << 24;

absl::Status fault(const std::string &path, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T)); // the hosts kiln runs on are LE
  return v;
}

enum class Kind { F32, Q80, Skip };

/// One tensor of the file: its Hugging Face name (empty for the RoPE
/// tables, which kiln computes), run.c's name, shape and storage.
struct Entry {
  std::string name, fileName;
  std::vector<int64_t> shape;
  Kind kind;
};

/// Calls `f` on each tensor in file order (export.py's legacy_export,
/// version1_export, version2_export); stops when it returns false.
void forEachTensor(const Llama2cHeader &h,
                   const std::function<bool(const Entry &)> &f) {
  const int64_t d = h.dim, hd = h.dim / h.nHeads, kv = h.nKvHeads * hd;
  const int64_t ffn = h.hiddenDim, vocab = std::abs(int64_t(h.vocabSize));
  const Kind mat = h.version == 2 ? Kind::Q80 : Kind::F32;
  bool go = true;
  auto one = [&](std::string name, std::string fileName,
                 std::vector<int64_t> shape, Kind kind) {
    if (go)
      go = f({std::move(name), std::move(fileName), std::move(shape), kind});
  };
  auto layers = [&](const char *module, const char *fileName,
                    std::vector<int64_t> shape, Kind kind) {
    for (int32_t l = 0; l < h.nLayers && go; ++l)
      one(absl::StrCat("model.layers.", l, ".", module),
          absl::StrCat(fileName, "[", l, "]"), shape, kind);
  };
  auto attention = [&] {
    layers("self_attn.q_proj.weight", "wq", {d, d}, mat);
    layers("self_attn.k_proj.weight", "wk", {kv, d}, mat);
    layers("self_attn.v_proj.weight", "wv", {kv, d}, mat);
    layers("self_attn.o_proj.weight", "wo", {d, d}, mat);
  };
  auto ffnLayers = [&] {
    layers("mlp.gate_proj.weight", "w1", {ffn, d}, mat);
    layers("mlp.down_proj.weight", "w2", {d, ffn}, mat);
    layers("mlp.up_proj.weight", "w3", {ffn, d}, mat);
  };
  auto classifier = [&] {
    if (!h.sharedClassifier)
      one("lm_head.weight", "wcls", {vocab, d}, mat);
  };
  auto attentionNorms = [&] {
    layers("input_layernorm.weight", "rms_att_weight", {d}, Kind::F32);
  };
  auto ffnNorms = [&] {
    layers("post_attention_layernorm.weight", "rms_ffn_weight", {d}, Kind::F32);
  };
  auto finalNorm = [&] {
    one("model.norm.weight", "rms_final_weight", {d}, Kind::F32);
  };
  if (h.version == 0) {
    one("model.embed_tokens.weight", "token_embedding_table", {vocab, d},
        Kind::F32);
    attentionNorms();
    attention();
    ffnNorms();
    ffnLayers();
    finalNorm();
    one("", "freq_cis_real", {h.seqLen, hd / 2}, Kind::Skip);
    one("", "freq_cis_imag", {h.seqLen, hd / 2}, Kind::Skip);
    classifier();
    return;
  }
  // Versions 1 and 2: the fp32 norms first, then the matrices.
  attentionNorms();
  ffnNorms();
  finalNorm();
  one("model.embed_tokens.weight", "token_embedding_table", {vocab, d}, mat);
  attention();
  ffnLayers();
  classifier();
}

/// Bytes of one tensor: fp32, or (Q8_0) its int8 values and an fp32 scale
/// per group. Shapes are checked to keep this below 2^52.
uint64_t tensorBytes(const Entry &e, int32_t groupSize) {
  uint64_t n = 1;
  for (int64_t s : e.shape)
    n *= uint64_t(s);
  return e.kind == Kind::Q80 ? n + 4 * (n / uint64_t(groupSize)) : 4 * n;
}

/// The bytes the header's sizes need, without overflow: closed form in 128
/// bits (the layer count alone may be 2^24).
unsigned __int128 neededBytes(const Llama2cHeader &h) {
  using U = unsigned __int128;
  const U d = U(h.dim), hd = d / U(h.nHeads), kv = U(h.nKvHeads) * hd;
  const U ffn = U(h.hiddenDim), vocab = U(std::abs(int64_t(h.vocabSize)));
  const U layers = U(h.nLayers), gs = U(h.groupSize > 0 ? h.groupSize : 1);
  auto matrix = [&](U n) { return h.version == 2 ? n + 4 * (n / gs) : 4 * n; };
  U perLayer =
      4 * 2 * d + matrix(d * d) * 2 + matrix(kv * d) * 2 + matrix(ffn * d) * 3;
  U total = h.headerBytes + layers * perLayer + 4 * d + matrix(vocab * d);
  if (h.version == 0)
    total += 4 * U(h.seqLen) * (hd / 2) * 2; // freq_cis_real, freq_cis_imag
  if (!h.sharedClassifier)
    total += matrix(vocab * d);
  return total;
}

std::string fieldsOf(const Llama2cHeader &h) {
  return absl::StrCat(
      "dim ", h.dim, ", hidden_dim ", h.hiddenDim, ", n_layers ", h.nLayers,
      ", n_heads ", h.nHeads, ", n_kv_heads ", h.nKvHeads, ", vocab_size ",
      h.vocabSize, ", seq_len ", h.seqLen,
      h.version == 2 ? absl::StrCat(", group_size ", h.groupSize) : "",
      h.sharedClassifier ? ", shared classifier" : ", separate classifier");
}

std::string bytesString(unsigned __int128 n) {
  if (n > ~uint64_t(0))
    return "more than 2^64";
  return absl::StrCat(uint64_t(n));
}
} // namespace

absl::StatusOr<std::unique_ptr<Llama2cCheckpoint>>
Llama2cCheckpoint::open(const std::string &path, bool tensors) {
  std::unique_ptr<Llama2cCheckpoint> file(new Llama2cCheckpoint(path));
  auto mapped = MappedFile::open(path);
  if (!mapped.ok())
    return mapped.status();
  file->mapping_ = std::move(*mapped);
  file->map_ = file->mapping_->data();
  file->size_ = file->mapping_->size();
  if (absl::Status s = file->parse(tensors); !s.ok())
    return s;
  return file;
}

Llama2cCheckpoint::~Llama2cCheckpoint() = default;

absl::Status Llama2cCheckpoint::parse(bool tensors) {
  const auto *bytes = static_cast<const uint8_t *>(map_);
  Llama2cHeader &h = header_;
  std::string what; // which header, for messages
  const uint8_t *fields = nullptr;
  if (size_ >= 4 && load<uint32_t>(bytes) == kMagic) {
    if (size_ < 8)
      return fault(path_, "truncated: the file ends inside the llama2.c "
                          "header (after the 'ak42' magic)");
    h.version = load<int32_t>(bytes + 4);
    if (h.version != 1 && h.version != 2)
      return fault(path_, absl::StrCat("llama2.c version ", h.version,
                                       " is not supported (versions 0, 1 "
                                       "and 2 are)"));
    what = absl::StrCat("llama2.c version ", h.version, " header");
    if (size_ < kHeader)
      return fault(path_, absl::StrCat("truncated: ", size_,
                                       " bytes, shorter "
                                       "than the ",
                                       what, " (", kHeader, " bytes)"));
    fields = bytes + 8;
    uint8_t shared = bytes[8 + 28];
    if (shared > 1)
      return fault(path_, absl::StrCat(what, ": shared_classifier is ",
                                       int(shared), ", not 0 or 1"));
    h.sharedClassifier = shared == 1;
    if (h.version == 2)
      h.groupSize = load<int32_t>(bytes + 8 + 28 + 1);
    h.headerBytes = kHeader;
  } else {
    // No magic: export.py's legacy_export (version 0).
    what = "llama2.c legacy header (no 'ak42' magic)";
    if (size_ < kLegacyHeader)
      return fault(path_, absl::StrCat("not a GGUF file or a llama2.c "
                                       "checkpoint: ",
                                       size_, " bytes, shorter than the ", what,
                                       " (28 bytes)"));
    fields = bytes;
    h.headerBytes = kLegacyHeader;
  }
  int32_t *dst[7] = {&h.dim,      &h.hiddenDim, &h.nLayers, &h.nHeads,
                     &h.nKvHeads, &h.vocabSize, &h.seqLen};
  const char *names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                          "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i)
    *dst[i] = load<int32_t>(fields + 4 * i);
  if (h.version == 0) // a negative vocabulary: a separate classifier
    h.sharedClassifier = h.vocabSize > 0;
  for (int i = 0; i < 7; ++i) {
    int64_t v = *dst[i];
    if (i == 5 && h.version == 0)
      v = std::abs(v);
    if (v <= 0)
      return fault(path_, absl::StrCat(what, ": ", names[i], " is ", *dst[i],
                                       i == 5 && h.version == 0
                                           ? ", not a vocabulary size"
                                           : ", not positive"));
    if (v > kMaxField)
      return fault(path_, absl::StrCat(what, ": ", names[i], " ", v,
                                       " is larger than kiln reads (",
                                       kMaxField, ")"));
  }
  if (h.version == 2 && (h.groupSize <= 0 || h.groupSize > kMaxField))
    return fault(path_, absl::StrCat(what, ": group_size ", h.groupSize,
                                     " is not a positive size"));
  if (h.dim % h.nHeads != 0)
    return fault(path_, absl::StrCat(what, ": n_heads (", h.nHeads,
                                     ") does not divide dim (", h.dim, ")"));
  if (h.nHeads % h.nKvHeads != 0)
    return fault(path_,
                 absl::StrCat(what, ": n_kv_heads (", h.nKvHeads,
                              ") does not divide n_heads (", h.nHeads, ")"));
  if ((h.dim / h.nHeads) % 2 != 0)
    return fault(path_,
                 absl::StrCat(what, ": head dimension ", h.dim / h.nHeads,
                              " (dim / n_heads) is odd; RoPE rotates "
                              "pairs of dimensions"));
  if (h.version == 2) {
    // export.py asserts this of every quantized tensor (runq.c relies on
    // it); the distinct sizes, each named by its first tensor.
    const int64_t d = h.dim, kv = h.nKvHeads * (h.dim / h.nHeads);
    const std::pair<const char *, int64_t> sizes[] = {
        {"token_embedding_table", std::abs(int64_t(h.vocabSize)) * d},
        {"wq[0]", d * d},
        {"wk[0]", kv * d},
        {"w1[0]", int64_t(h.hiddenDim) * d}};
    for (auto [name, n] : sizes)
      if (n % h.groupSize != 0)
        return fault(path_, absl::StrCat(what, ": group_size ", h.groupSize,
                                         " does not divide tensor '", name,
                                         "' (", n, " values)"));
  }

  // The tensors fill the file exactly (export.py writes nothing else).
  const unsigned __int128 need = neededBytes(h);
  if (need != size_) {
    std::string where;
    if (need > size_) { // name the tensor the file ends in
      uint64_t at = h.headerBytes;
      forEachTensor(h, [&](const Entry &e) {
        at += tensorBytes(e, h.groupSize);
        if (at <= size_)
          return true;
        where =
            absl::StrCat(": the file ends inside tensor '", e.fileName, "'");
        return false;
      });
    }
    return fault(path_, absl::StrCat(what, " (", fieldsOf(h), ") needs ",
                                     bytesString(need), " bytes, the file has ",
                                     size_, where));
  }

  config_.hiddenSize = h.dim;
  config_.intermediateSize = h.hiddenDim;
  config_.numLayers = h.nLayers;
  config_.numHeads = h.nHeads;
  config_.numKVHeads = h.nKvHeads;
  config_.vocabSize = std::abs(int64_t(h.vocabSize));
  config_.maxPositions = h.seqLen;
  config_.rmsNormEps = 1e-5;   // run.c's rmsnorm: ss += 1e-5f
  config_.ropeTheta = 10000.0; // run.c: powf(10000.0f, head_dim / head_size)
  config_.tieWordEmbeddings = h.sharedClassifier;
  config_.torchDtype = "llama2c";
  if (!tensors)
    return absl::OkStatus();

  uint64_t at = h.headerBytes;
  absl::Status bad = absl::OkStatus();
  forEachTensor(h, [&](const Entry &e) {
    const uint64_t n = tensorBytes(e, h.groupSize);
    const uint8_t *data = bytes + at;
    at += n;
    if (e.kind == Kind::Skip)
      return true;
    TensorView view{e.fileName, DType::F32, e.shape, data, size_t(n)};
    if (e.kind == Kind::Q80) {
      // runq.c's dequantize: x[i] = q[i] * s[i / GS], in f32.
      const uint64_t count = uint64_t(e.shape[0]) * uint64_t(e.shape[1]);
      const uint64_t gs = uint64_t(h.groupSize);
      std::vector<float> &out = dequantized_.emplace_back(count); // [count]
      const uint8_t *scales = data + count; // [count / gs] fp32
      for (uint64_t g = 0; g < count / gs; ++g) {
        const float s = load<float>(scales + 4 * g);
        // quantize_q80's scales are max|w| / 127. Anything else is a garbled
        // file, or one of the same size whose values and scales lie
        // elsewhere (an export.py that wrote all scales last).
        if (!(s >= 0) || std::isinf(s)) {
          bad = fault(path_, absl::StrCat("tensor '", e.fileName, "' group ", g,
                                          ": scale ", s,
                                          " is not a non-negative number "
                                          "(quantize_q80 writes max|w| / "
                                          "127)"));
          return false;
        }
        for (uint64_t i = g * gs; i < (g + 1) * gs; ++i)
          out[i] = float(int8_t(data[i])) * s;
      }
      view.data = reinterpret_cast<const uint8_t *>(out.data());
      view.numBytes = count * 4;
    }
    byName_.emplace(e.name, std::move(view));
    return true;
  });
  return bad;
}

const TensorView *Llama2cCheckpoint::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &it->second;
}

std::string Llama2cCheckpoint::describe() const {
  if (header_.version == 2)
    return absl::StrCat("llama2.c version 2 (Q8_0, group size ",
                        header_.groupSize, ")");
  return absl::StrCat("llama2.c version ", header_.version, " (fp32)");
}

} // namespace kiln
