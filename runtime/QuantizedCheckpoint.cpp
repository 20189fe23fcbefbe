//===- QuantizedCheckpoint.cpp - GPTQ and AWQ checkpoints, read -----------===//
//
// The layouts, with the tools' code they come from, are in
// docs/quantized-checkpoints.md; in short (K = cols = input features, N =
// rows = output features, f = 32 / bits fields per int32 word, low bits
// first):
//
//   GPTQ qweight I32 [K / f, N]  word [k / f, n], field k % f: code (k, n)
//        qzeros  I32 [G, N / f]  word [g, n / f], field n % f: zero (g, n),
//                                minus 1 in v1 ("gptq"), as is in "gptq_v2"
//        scales  F16 [G, N]      g_idx I32 [K]: the group of input k
//   AWQ  qweight I32 [K, N / 8]  word [k, n / 8], field kAwqField[n % 8]
//        qzeros  I32 [G, N / 8]  alike; scales F16 [G, N]; group k / size
//
//===----------------------------------------------------------------------===//
#include "runtime/QuantizedCheckpoint.h"
#include "runtime/JsonRead.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <cstring>

namespace kiln {
namespace {
using Json = nlohmann::json;

// AutoAWQ's WQLinear_GEMM.from_linear packs output 8j + AWQ_ORDER[i] into
// field i of word j, AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]; the field of
// output 8j + m is its inverse, AWQ_REVERSE_ORDER (awq/utils/packing_utils.py).
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7}; // output of field i
constexpr int kAwqField[8] = {0, 4, 1, 5, 2, 6, 3, 7}; // field of output m

/// Checks quantization_config's fields; the first failure wins.
struct ConfigReader {
  const Json &json;
  const std::string &path;
  absl::Status status = absl::OkStatus();

  void fail(const std::string &what) {
    if (status.ok())
      status = absl::InvalidArgumentError(
          absl::StrCat(path, ": quantization_config", what));
  }
  const Json *find(const char *key) const {
    auto it = json.find(key);
    return it == json.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const char *key, const std::string &fallback) {
    const Json *v = find(key);
    if (!v)
      return fallback;
    if (!v->is_string()) {
      fail(absl::StrCat(".", key, " must be a string, not ", v->dump()));
      return fallback;
    }
    return v->get<std::string>();
  }
  bool boolean(const char *key, bool fallback) {
    const Json *v = find(key);
    if (!v)
      return fallback;
    if (!v->is_boolean()) {
      fail(absl::StrCat(".", key, " must be true or false, not ", v->dump()));
      return fallback;
    }
    return v->get<bool>();
  }
  int64_t integer(const char *key, int64_t fallback, bool required) {
    const Json *v = find(key);
    if (!v) {
      if (required)
        fail(absl::StrCat(" has no '", key, "'"));
      return fallback;
    }
    try {
      return jsonInteger<int64_t>(*v);
    } catch (const std::exception &) {
      fail(absl::StrCat(".", key, " must be an integer, not ", v->dump()));
      return fallback;
    }
  }
};

absl::Status fault(const WeightSet &weights, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(weights.origin(), ": ", what));
}

uint32_t word(const TensorView &t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.data + 4 * i, 4);
  return w; // safetensors is little-endian, as kiln's hosts are
}

/// The tensor `name`, of dtype `dtype` and shape `shape`, or an error.
absl::StatusOr<const TensorView *> tensor(const WeightSet &weights,
                                          const std::string &name, DType dtype,
                                          const std::vector<int64_t> &shape,
                                          const std::string &layout,
                                          const char *why = "") {
  const TensorView *t = weights.find(name);
  if (!t)
    return fault(weights, absl::StrCat("missing tensor '", name, "'", why));
  if (t->dtype != dtype)
    return fault(weights, absl::StrCat("tensor '", name, "' has dtype ",
                                       dtypeName(t->dtype), "; ", layout,
                                       " stores it as ", dtypeName(dtype)));
  if (t->shape != shape)
    return fault(weights, absl::StrCat("tensor '", name, "' has shape ",
                                       shapeString(t->shape), "; ", layout,
                                       " stores ", shapeString(shape)));
  return t;
}

/// Field f (bits wide, low bits first) of a word.
inline uint8_t field(uint32_t w, int f, int bits) {
  return uint8_t((w >> (f * bits)) & ((1u << bits) - 1));
}
} // namespace

std::string QuantizationConfig::describe() const {
  return absl::StrCat(bits, "-bit ",
                      method == QuantMethod::GPTQ ? "GPTQ" : "AWQ");
}

QuantFormat QuantizationConfig::format() const {
  QuantFormat f;
  f.kind = bits == 4 ? QuantKind::Int4 : QuantKind::Int8;
  f.group = groupSize == -1 ? 0 : groupSize;
  f.zeroPoints = true;
  f.actOrder = method == QuantMethod::GPTQ && descAct;
  return f;
}

absl::StatusOr<std::optional<QuantizationConfig>>
readQuantizationConfig(std::string_view configJson, const std::string &path) {
  Json root;
  try {
    root = Json::parse(configJson);
  } catch (const std::exception &e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON: ", jsonErrorMessage(e)));
  }
  if (!root.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object"));
  auto it = root.find("quantization_config");
  if (it == root.end() || it->is_null())
    return std::optional<QuantizationConfig>();
  if (!it->is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": quantization_config is not a JSON object"));

  ConfigReader r{*it, path};
  QuantizationConfig c;
  if (!r.find("quant_method"))
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": quantization_config has no 'quant_method'"));
  std::string method = absl::AsciiStrToLower(r.string("quant_method", ""));
  if (!r.status.ok())
    return r.status;
  if (method == "gptq")
    c.method = QuantMethod::GPTQ;
  else if (method == "awq")
    c.method = QuantMethod::AWQ;
  else
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": quantization_config.quant_method is '", method,
        "'; kiln reads pre-quantized 'gptq' and 'awq' checkpoints"));

  int64_t bits = r.integer("bits", 4, /*required=*/true);
  if (r.status.ok()) {
    if (c.method == QuantMethod::AWQ && bits != 4)
      r.fail(absl::StrCat(".bits is ", bits, "; AWQ's GEMM format is 4-bit"));
    else if (bits != 4 && bits != 8)
      r.fail(absl::StrCat(".bits is ", bits,
                          "; kiln reads 4- and 8-bit GPTQ checkpoints"));
  }
  c.bits = int(bits);
  // transformers' GPTQConfig and AwqConfig default group_size to 128.
  c.groupSize = r.integer("group_size", 128, /*required=*/false);
  if (r.status.ok() && c.groupSize != -1 && c.groupSize <= 0)
    r.fail(absl::StrCat(".group_size must be a positive integer or -1 (the "
                        "whole row), not ",
                        c.groupSize));

  if (c.method == QuantMethod::GPTQ) {
    c.sym = r.boolean("sym", true);
    c.descAct = r.boolean("desc_act", false);
    // config.json spells it checkpoint_format (transformers' GPTQConfig);
    // GPTQModel's quantize_config.json, format.
    const char *formatKey = r.find("checkpoint_format") ? "checkpoint_format"
                            : r.find("format")          ? "format"
                                                        : "checkpoint_format";
    std::string format = absl::AsciiStrToLower(r.string(formatKey, "gptq"));
    if (r.status.ok()) {
      if (format == "gptq_v2")
        c.gptqV2 = true;
      else if (format != "gptq")
        r.fail(absl::StrCat(".", formatKey, " is '", format,
                            "'; kiln reads 'gptq' (v1) and 'gptq_v2'"));
    }
    if (r.boolean("is_marlin_format", false))
      r.fail(".is_marlin_format is true; kiln reads the 'gptq' packing, not "
             "Marlin's");
    std::string pack = r.string("pack_dtype", "int32");
    if (r.status.ok() && pack != "int32")
      r.fail(absl::StrCat(".pack_dtype is '", pack,
                          "'; kiln reads GPTQ packed in int32 words"));
    if (r.boolean("lm_head", false))
      r.fail(".lm_head is true; kiln reads checkpoints whose lm_head is not "
             "quantized");
    if (const Json *d = r.find("dynamic"); d && !d->empty())
      r.fail(".dynamic (per-module overrides) is set; kiln reads one format "
             "for every module");
  } else {
    c.zeroPoint = r.boolean("zero_point", true);
    if (r.status.ok() && !c.zeroPoint)
      r.fail(".zero_point is false; AutoAWQ's GEMM format always has zero "
             "points");
    // AutoAWQ writes "gemm"; transformers' AWQLinearVersion.from_str lowers.
    std::string version = absl::AsciiStrToLower(r.string("version", "gemm"));
    if (r.status.ok() && version != "gemm")
      r.fail(absl::StrCat(".version is '", version,
                          "'; kiln reads AutoAWQ's 'gemm' packing only"));
    std::string backend = absl::AsciiStrToLower(r.string("backend", "autoawq"));
    if (r.status.ok() && backend != "autoawq")
      r.fail(absl::StrCat(".backend is '", backend,
                          "'; kiln reads AutoAWQ's packing ('autoawq')"));
  }
  if (!r.status.ok())
    return r.status;
  return std::optional<QuantizationConfig>(c);
}

namespace {
/// A module's tensors, checked against the config and its shape.
struct ModuleTensors {
  const TensorView *qweight = nullptr, *qzeros = nullptr, *scales = nullptr;
  std::vector<int32_t> gIdx; // when g_idx is not c / group
};

absl::StatusOr<ModuleTensors> locate(const WeightSet &weights,
                                     const std::string &module,
                                     const QuantizationConfig &cfg,
                                     int64_t rows, int64_t cols) {
  const bool gptq = cfg.method == QuantMethod::GPTQ;
  const std::string what = cfg.describe();
  if (cfg.bits != 4 && (cfg.bits != 8 || !gptq))
    return fault(weights, absl::StrCat("'", module, "': ", what,
                                       "; kiln reads 4- or 8-bit GPTQ and "
                                       "4-bit AWQ"));
  if (rows <= 0 || cols <= 0)
    return fault(weights, absl::StrCat("'", module, "': a [", rows, ", ", cols,
                                       "] weight has no elements"));
  if (cfg.groupSize != -1 && cfg.groupSize <= 0)
    return fault(weights,
                 absl::StrCat("'", module, "': group size ", cfg.groupSize,
                              "; a group size is positive or -1 (the whole "
                              "row)"));
  const int64_t group = cfg.groupSize == -1 ? cols : cfg.groupSize;
  if (cols % group != 0)
    return fault(weights,
                 absl::StrCat("group size ", group, " does not divide the ",
                              cols, " input features of '", module, "'"));
  const int bits = cfg.bits;
  const int perWord = 32 / bits;
  const int64_t groups = cols / group;
  // qzeros (and AWQ's qweight) pack output features into words, GPTQ's
  // qweight input features.
  if (rows % perWord != 0)
    return fault(weights,
                 absl::StrCat("the ", rows, " output features of '", module,
                              "' do not fill whole int32 words of ", bits,
                              "-bit fields"));
  if (gptq && cols % perWord != 0)
    return fault(weights,
                 absl::StrCat("the ", cols, " input features of '", module,
                              "' do not fill whole int32 words of ", bits,
                              "-bit fields"));

  std::string layout = absl::StrCat(what, " of a [", rows, ", ", cols,
                                    "] weight with group size ", group);
  auto qweight = tensor(weights, module + ".qweight", DType::I32,
                        gptq ? std::vector<int64_t>{cols / perWord, rows}
                             : std::vector<int64_t>{cols, rows / perWord},
                        layout);
  if (!qweight.ok())
    return qweight.status();
  auto qzeros = tensor(weights, module + ".qzeros", DType::I32,
                       {groups, rows / perWord}, layout);
  if (!qzeros.ok())
    return qzeros.status();
  auto scales =
      tensor(weights, module + ".scales", DType::F16, {groups, rows}, layout);
  if (!scales.ok())
    return scales.status();

  ModuleTensors m{*qweight, *qzeros, *scales, {}};

  // g_idx: GPTQ's group of each input feature. GPTQ (AutoGPTQ's and
  // GPTQModel's gptq.py) makes it [c // group] permuted by act-order's
  // inverse permutation, so every group holds exactly `group` columns.
  if (gptq && (cfg.descAct || weights.find(module + ".g_idx"))) {
    auto gIdx = tensor(weights, module + ".g_idx", DType::I32, {cols}, layout,
                       cfg.descAct ? " (desc_act is true)" : "");
    if (!gIdx.ok())
      return gIdx.status();
    std::vector<int32_t> g(cols);
    std::vector<int64_t> count(groups, 0);
    bool plain = true;
    for (int64_t c = 0; c < cols; ++c) {
      int32_t v;
      std::memcpy(&v, (*gIdx)->data + 4 * c, 4);
      if (v < 0 || v >= groups)
        return fault(weights,
                     absl::StrCat("tensor '", module, ".g_idx' entry ", c,
                                  " is ", v, ", outside the ", groups,
                                  " groups [0, ", groups, ")"));
      g[c] = v;
      ++count[v];
      plain = plain && v == c / group;
    }
    for (int64_t i = 0; i < groups; ++i)
      if (count[i] != group)
        return fault(weights,
                     absl::StrCat("tensor '", module, ".g_idx' gives group ", i,
                                  " ", count[i],
                                  " columns; GPTQ's groups hold exactly ",
                                  group));
    if (!plain)
      m.gIdx = std::move(g);
  }
  return m;
}
} // namespace

absl::Status checkQuantizedLinear(const WeightSet &weights,
                                  const std::string &module,
                                  const QuantizationConfig &cfg, int64_t rows,
                                  int64_t cols) {
  return locate(weights, module, cfg, rows, cols).status();
}

absl::StatusOr<QuantizedMatrix>
readQuantizedLinear(const WeightSet &weights, const std::string &module,
                    const QuantizationConfig &cfg, int64_t rows, int64_t cols) {
  auto located = locate(weights, module, cfg, rows, cols);
  if (!located.ok())
    return located.status();
  const bool gptq = cfg.method == QuantMethod::GPTQ;
  const int bits = cfg.bits;
  const int perWord = 32 / bits;
  const int64_t group = cfg.groupSize == -1 ? cols : cfg.groupSize;
  const int64_t groups = cols / group;
  const TensorView *qzeros = located->qzeros, *scales = located->scales;

  QuantizedMatrix m;
  m.format.kind = bits == 4 ? QuantKind::Int4 : QuantKind::Int8;
  m.format.group = cfg.groupSize == -1 ? 0 : cfg.groupSize;
  m.rows = rows;
  m.cols = cols;
  m.gIdx = std::move(located->gIdx);

  // Zero points and scales, [groups, rows] on disk, [rows, groups] here.
  const int maxCode = (1 << bits) - 1;
  const int add = gptq && !cfg.gptqV2 ? 1 : 0; // v1 stores zero - 1
  std::vector<uint8_t> zeros(rows * groups);
  bool middleOnly = true;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t w = 0; w < rows / perWord; ++w) {
      uint32_t z = word(*qzeros, g * (rows / perWord) + w);
      for (int f = 0; f < perWord; ++f) {
        int64_t r = w * perWord + (gptq ? f : kAwqOrder[f]);
        int zero = field(z, f, bits) + add;
        if (zero > maxCode)
          return fault(weights,
                       absl::StrCat("tensor '", module, ".qzeros' holds ",
                                    int(field(z, f, bits)), " for group ", g,
                                    ", output ", r, ": zero point ", zero,
                                    " in v1 (stored + 1), past the ", bits,
                                    "-bit codes 0..", maxCode));
        zeros[r * groups + g] = uint8_t(zero);
        middleOnly = middleOnly && zero == m.format.middle();
      }
    }
  m.format.zeroPoints = !middleOnly;
  if (m.format.zeroPoints)
    m.zeros = std::move(zeros);
  m.scales.resize(rows * groups);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(&m.scales[r * groups + g], scales->data + 2 * (g * rows + r),
                  2);

  // Codes, [rows, cols].
  m.codes.resize(rows * cols);
  const TensorView &q = *located->qweight;
  if (gptq) {
    for (int64_t kw = 0; kw < cols / perWord; ++kw)
      for (int64_t r = 0; r < rows; ++r) {
        uint32_t w = word(q, kw * rows + r);
        uint8_t *out = &m.codes[r * cols + kw * perWord];
        for (int f = 0; f < perWord; ++f)
          out[f] = field(w, f, bits);
      }
  } else {
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t rw = 0; rw < rows / 8; ++rw) {
        uint32_t w = word(q, c * (rows / 8) + rw);
        for (int r = 0; r < 8; ++r)
          m.codes[(rw * 8 + r) * cols + c] = field(w, kAwqField[r], 4);
      }
  }
  return m;
}

} // namespace kiln
