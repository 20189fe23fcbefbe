//===- GgufModel.cpp - a llama GGUF file as a Llama 2 checkpoint ----------===//
#include "runtime/GgufModel.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

namespace kiln {
namespace {
absl::Status fault(const GgufFile &file, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", what));
}

/// Reads llama.* keys, keeping the first fault.
struct MetadataReader {
  const GgufFile &file;
  absl::Status status = absl::OkStatus();

  void fail(const std::string &what) {
    if (status.ok())
      status = fault(file, what);
  }

  /// A positive integer key; `fallback` < 0: required.
  int64_t positive(const std::string &key, int64_t fallback = -1) {
    const GgufValue *v = file.find(key);
    if (!v) {
      if (fallback < 0)
        fail(absl::StrCat("missing metadata '", key, "'"));
      return fallback;
    }
    auto n = v->isArray() ? std::nullopt : v->integer();
    if (!n || *n <= 0 || *n > (int64_t(1) << 40)) {
      fail(absl::StrCat("metadata '", key, "' must be a positive integer, not ",
                        v->describe()));
      return 1;
    }
    return *n;
  }

  double positiveReal(const std::string &key, double fallback = -1) {
    const GgufValue *v = file.find(key);
    if (!v) {
      if (fallback < 0)
        fail(absl::StrCat("missing metadata '", key, "'"));
      return fallback;
    }
    auto x = v->isArray() ? std::nullopt : v->number();
    if (!x || !(*x > 0) || *x > 1e30) {
      fail(absl::StrCat("metadata '", key, "' must be a positive number, not ",
                        v->describe()));
      return 1;
    }
    return *x;
  }
};

// blk.N.<suffix> -> model.layers.N.<module>.
struct LayerTensor {
  const char *gguf, *hf;
};
constexpr LayerTensor kLayerTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

bool isProjection(std::string_view hf) {
  return hf.find("_proj.weight") != std::string_view::npos;
}
} // namespace

absl::StatusOr<LlamaConfig> ggufLlamaConfig(const GgufFile &file) {
  const GgufValue *arch = file.find("general.architecture");
  if (!arch || !arch->string())
    return fault(file, "missing metadata 'general.architecture' (a string)");
  if (*arch->string() != "llama")
    return fault(file, absl::StrCat("general.architecture is '",
                                    std::string(*arch->string()),
                                    "'; kiln reads 'llama' (Llama 2)"));
  if (const GgufValue *s = file.find("llama.rope.scaling.type")) {
    auto type = s->string();
    if (!type || *type != "none")
      return fault(file,
                   absl::StrCat("llama.rope.scaling.type is ", s->describe(),
                                "; kiln supports Llama 2's unscaled "
                                "RoPE only"));
  }
  // Other spellings of a scaled RoPE, and mixtures of experts.
  for (const char *key :
       {"llama.rope.scale_linear", "llama.rope.scaling.factor"})
    if (const GgufValue *v = file.find(key)) {
      auto x = v->isArray() ? std::nullopt : v->number();
      if (!x || *x != 1.0)
        return fault(file, absl::StrCat(key, " is ", v->describe(),
                                        "; kiln supports Llama 2's unscaled "
                                        "RoPE only"));
    }
  if (const GgufValue *v = file.find("llama.expert_count")) {
    auto x = v->isArray() ? std::nullopt : v->integer();
    if (!x || *x != 0)
      return fault(file, absl::StrCat("llama.expert_count is ", v->describe(),
                                      "; kiln runs dense Llama 2, not a "
                                      "mixture of experts"));
  }
  MetadataReader r{file};
  LlamaConfig c;
  c.hiddenSize = r.positive("llama.embedding_length");
  c.intermediateSize = r.positive("llama.feed_forward_length");
  c.numLayers = r.positive("llama.block_count");
  c.numHeads = r.positive("llama.attention.head_count");
  c.numKVHeads = r.positive("llama.attention.head_count_kv", c.numHeads);
  c.maxPositions = r.positive("llama.context_length");
  c.rmsNormEps = r.positiveReal("llama.attention.layer_norm_rms_epsilon");
  c.ropeTheta = r.positiveReal("llama.rope.freq_base", 10000.0);
  int64_t ropeDims = r.positive("llama.rope.dimension_count", 0);
  if (!r.status.ok())
    return r.status;
  const GgufTensor *embed = file.tensor("token_embd.weight");
  if (!embed || embed->dims.size() != 2)
    return fault(file, "has no 2-D tensor 'token_embd.weight' (the token "
                       "embeddings)");
  c.vocabSize = embed->dims[1];
  // The counts that size the whole model, held to the tensors before
  // anything is built from them.
  if (embed->dims[0] != c.hiddenSize)
    return fault(file, absl::StrCat("llama.embedding_length (", c.hiddenSize,
                                    ") differs from token_embd.weight's "
                                    "rows of ",
                                    embed->dims[0]));
  // Every block 0..N-1 holds its nine tensors, and nothing kiln would not
  // read is there (a bias, a tensor of another block): tensors the model
  // would ignore are a model kiln would run wrong.
  std::vector<int> perBlock(size_t(std::min<int64_t>(c.numLayers, 1 << 20)));
  for (const GgufTensor &t : file.tensors()) {
    if (t.name == "rope_freqs.weight")
      return fault(file, "tensor 'rope_freqs.weight' scales RoPE's "
                         "frequencies (Llama 3's scaling); kiln supports "
                         "Llama 2's unscaled RoPE only");
    std::string name = ggufToHuggingFaceName(t.name);
    constexpr std::string_view layers = "model.layers.";
    if (name.compare(0, layers.size(), layers) == 0) {
      int64_t block = std::stoll(name.substr(layers.size()));
      if (block >= int64_t(perBlock.size()))
        return fault(file, absl::StrCat("tensor '", t.name,
                                        "' is past llama.block_count (",
                                        c.numLayers, ")"));
      ++perBlock[size_t(block)];
    } else if (name.empty() && t.name.compare(0, 4, "blk.") == 0) {
      return fault(file, absl::StrCat("tensor '", t.name,
                                      "' is not one of a Llama 2 block's "
                                      "(kiln would leave it out)"));
    }
  }
  for (size_t b = 0; b < perBlock.size(); ++b)
    if (perBlock[b] != int(std::size(kLayerTensors)))
      return fault(file, absl::StrCat("llama.block_count is ", c.numLayers,
                                      ", but block ", b, " has ", perBlock[b],
                                      " of its ", std::size(kLayerTensors),
                                      " tensors"));
  if (const GgufTensor *up = file.tensor("blk.0.ffn_up.weight");
      up && up->dims.size() == 2 && up->dims[1] != c.intermediateSize)
    return fault(file,
                 absl::StrCat("llama.feed_forward_length (", c.intermediateSize,
                              ") differs from blk.0.ffn_up.weight's ",
                              up->dims[1], " rows"));
  c.tieWordEmbeddings = file.tensor("output.weight") == nullptr;
  c.torchDtype = "gguf";
  if (c.hiddenSize % c.numHeads != 0)
    return fault(file, absl::StrCat("llama.attention.head_count (", c.numHeads,
                                    ") does not divide "
                                    "llama.embedding_length (",
                                    c.hiddenSize, ")"));
  if (c.numHeads % c.numKVHeads != 0)
    return fault(file,
                 absl::StrCat("llama.attention.head_count_kv (", c.numKVHeads,
                              ") does not divide "
                              "llama.attention.head_count (",
                              c.numHeads, ")"));
  if (c.headDim() % 2 != 0)
    return fault(file, absl::StrCat("head dimension ", c.headDim(),
                                    " is odd; RoPE rotates pairs of "
                                    "dimensions"));
  if (ropeDims != 0 && ropeDims != c.headDim())
    return fault(file,
                 absl::StrCat("llama.rope.dimension_count (", ropeDims,
                              ") is not the head dimension (", c.headDim(),
                              "); kiln rotates whole heads"));
  if (const GgufValue *v = file.find("llama.vocab_size")) {
    auto n = v->isArray() ? std::nullopt : v->integer();
    if (!n || *n != c.vocabSize)
      return fault(file, absl::StrCat("llama.vocab_size (", v->describe(),
                                      ") differs from token_embd.weight's ",
                                      c.vocabSize, " rows"));
  }
  return c;
}

std::string ggufToHuggingFaceName(std::string_view name) {
  if (name == "token_embd.weight")
    return "model.embed_tokens.weight";
  if (name == "output_norm.weight")
    return "model.norm.weight";
  if (name == "output.weight")
    return "lm_head.weight";
  // blk.<layer>.<suffix>, the layer in plain decimal.
  constexpr std::string_view blk = "blk.";
  if (name.substr(0, blk.size()) != blk)
    return "";
  std::string_view rest = name.substr(blk.size());
  size_t dot = rest.find('.');
  std::string_view layer = rest.substr(0, dot);
  if (dot == std::string_view::npos || layer.empty() || layer.size() > 6 ||
      (layer.size() > 1 && layer[0] == '0') ||
      layer.find_first_not_of("0123456789") != std::string_view::npos)
    return "";
  std::string_view suffix = rest.substr(dot + 1);
  for (const LayerTensor &t : kLayerTensors)
    if (suffix == t.gguf)
      return absl::StrCat("model.layers.", std::string(layer), ".", t.hf);
  return "";
}

std::optional<QuantFormat> ggmlCanonicalFormat(GgmlType type) {
  auto mins = [](QuantKind kind, int64_t group) {
    QuantFormat f{kind, group};
    f.mins = true;
    return f;
  };
  switch (type) {
  case GgmlType::Q8_0:
  case GgmlType::Q5_0:
    return QuantFormat{QuantKind::Int8, 32};
  case GgmlType::Q4_0:
    return QuantFormat{QuantKind::Int4, 32};
  case GgmlType::Q4_1:
  case GgmlType::Q4_K:
    return mins(QuantKind::Int4, 32);
  case GgmlType::Q5_1:
  case GgmlType::Q5_K:
    return mins(QuantKind::Int8, 32);
  case GgmlType::Q6_K:
    return mins(QuantKind::Int8, 16);
  default:
    return std::nullopt;
  }
}

std::optional<QuantFormat> joinExact(const QuantFormat &a,
                                     const QuantFormat &b) {
  if (a == b)
    return a;
  if (a.kind == QuantKind::FP8 || b.kind == QuantKind::FP8 || a.zeroPoints ||
      b.zeroPoints || a.actOrder || b.actOrder || !a.group || !b.group ||
      std::max(a.group, b.group) % std::min(a.group, b.group))
    return std::nullopt;
  QuantFormat f;
  f.kind = a.kind == QuantKind::Int4 && b.kind == QuantKind::Int4
               ? QuantKind::Int4
               : QuantKind::Int8;
  f.group = std::min(a.group, b.group);
  // Without mins the codes shift to the wider kind's middle; with mins
  // they stay as they are, and a format without mins gets min = middle *
  // scale.
  f.mins = a.mins || b.mins;
  return f;
}

QuantizedMatrix ggmlToCanonical(GgmlType type, const uint8_t *blocks,
                                int64_t rows, int64_t cols, QuantFormat as) {
  QuantizedMatrix m;
  m.format = as;
  m.rows = rows;
  m.cols = cols;
  m.codes.resize(size_t(rows * cols));
  const GgmlTypeInfo info = ggmlTypeInfo(type);
  const int64_t blockCount = rows * cols / info.blockElements;
  if (as.mins) {
    // Each of the block's groups split into groups of `as`.
    const int64_t natural = ggmlGroupSize(type);
    const int64_t perBlock = info.blockElements / natural;
    const int64_t split = natural / as.group;
    m.wideScales.resize(size_t(rows * (cols / as.group)));
    m.mins.resize(m.wideScales.size());
    float scales[16], mins[16]; // a block's groups
    for (int64_t b = 0; b < blockCount; ++b) {
      ggmlBlockGroups(type, blocks + b * info.blockBytes,
                      m.codes.data() + b * info.blockElements, scales, mins);
      for (int64_t g = 0; g < perBlock * split; ++g) {
        m.wideScales[b * perBlock * split + g] = scales[g / split];
        m.mins[b * perBlock * split + g] = mins[g / split];
      }
    }
    return m;
  }
  // Q8_0, Q5_0, Q4_0 as int8-g32/int4-g32: their f16 scales, the codes
  // shifted so that `as`'s middle is zero.
  m.scales.resize(size_t(blockCount));
  const int shift = as.middle() - (type == GgmlType::Q8_0   ? 128
                                   : type == GgmlType::Q5_0 ? 16
                                                            : 8);
  float scale, min;
  for (int64_t b = 0; b < blockCount; ++b) {
    const uint8_t *block = blocks + b * info.blockBytes;
    uint8_t *codes = m.codes.data() + b * 32;
    ggmlBlockGroups(type, block, codes, &scale, &min);
    std::memcpy(&m.scales[b], block, 2);
    for (int j = 0; j < 32; ++j)
      codes[j] = uint8_t(codes[j] + shift);
  }
  return m;
}

std::string ggufProjectionBlockTypes(const GgufFile &file) {
  std::vector<std::string> types;
  for (const GgufTensor &t : file.tensors()) {
    std::string name = ggmlTypeInfo(t.type).name;
    if (isProjection(ggufToHuggingFaceName(t.name)) &&
        t.type != GgmlType::F32 && t.type != GgmlType::F16 &&
        t.type != GgmlType::BF16 &&
        std::find(types.begin(), types.end(), name) == types.end())
      types.push_back(name);
  }
  return absl::StrJoin(types, ", ");
}

namespace {
/// The buffer a projection shares with others once fused (the fusion
/// pass packs a layer's q, k and v, and its gate and up): its key.
std::string bufferOf(const std::string &hf) {
  for (const char *part : {"self_attn.q_proj", "self_attn.k_proj",
                           "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"})
    if (size_t at = hf.find(part); at != std::string::npos)
      return hf.substr(0, at) + (part[0] == 's' ? "qkv" : "gate_up");
  return hf;
}
} // namespace

std::optional<std::map<std::string, QuantFormat>>
ggufProjectionFormats(const GgufFile &file) {
  std::map<std::string, QuantFormat> byBuffer;
  std::vector<std::string> names;
  for (const GgufTensor &t : file.tensors()) {
    std::string hf = ggufToHuggingFaceName(t.name);
    if (!isProjection(hf))
      continue;
    auto f = ggmlCanonicalFormat(t.type);
    if (!f)
      return std::nullopt; // a float projection: floats, all of them
    auto [it, fresh] = byBuffer.emplace(bufferOf(hf), *f);
    if (!fresh) {
      auto joined = joinExact(it->second, *f);
      if (!joined)
        return std::nullopt;
      it->second = *joined;
    }
    names.push_back(std::move(hf));
  }
  std::map<std::string, QuantFormat> formats;
  for (const std::string &hf : names)
    formats[hf] = byBuffer.at(bufferOf(hf));
  if (!formats.empty())
    for (const GgufTensor &t : file.tensors())
      if (t.name == "output.weight")
        if (auto f = ggmlCanonicalFormat(t.type))
          formats["lm_head.weight"] = *f;
  return formats;
}

std::string describeFormats(const std::map<std::string, QuantFormat> &formats) {
  std::vector<std::string> names;
  for (const auto &[weight, f] : formats)
    if (std::find(names.begin(), names.end(), f.name()) == names.end())
      names.push_back(f.name());
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

} // namespace kiln
