// Reading GPTQ and AWQ checkpoints (runtime/QuantizedCheckpoint.h): the real
// tools' checkpoints of tiny-mha (test/fixtures/quant/tiny-mha-{gptq,awq}-*,
// made by GPTQModel and AutoAWQ through test/fixtures/make_gptq_awq_fixture.py,
// whose dequantization the tools' own unpacking code cross-checked) must
// dequantize bit for bit to their dequantized.safetensors; small modules
// packed here by the tools' packing rules; and every malformed input, each
// with its one-line message.
#include "runtime/QuantizedCheckpoint.h"
#include "TestFiles.h"
#include "runtime/Hash.h"
#include "runtime/PlanDevice.h"
#include "runtime/QuantLayout.h"
#include "runtime/SafeTensors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

namespace {

std::string fixtures() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures");
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// --- The tools' checkpoints -------------------------------------------------

struct Variant {
  const char *name;
  QuantMethod method;
  int bits;
  int64_t groupSize;
  bool sym, descAct, gptqV2;
  const char *format; // canonical QuantFormat::name()
  bool gIdx;          // act-order: gIdx kept
};

const Variant kVariants[] = {
    {"gptq-4b-g32-sym", QuantMethod::GPTQ, 4, 32, true, false, false,
     "int4-g32", false},
    {"gptq-4b-g128-asym", QuantMethod::GPTQ, 4, 128, false, false, false,
     "int4-g128-zp", false},
    {"gptq-4b-g32-actorder", QuantMethod::GPTQ, 4, 32, false, true, false,
     "int4-g32-zp", true},
    {"gptq-8b-row", QuantMethod::GPTQ, 8, -1, true, false, false, "int8",
     false},
    {"gptq-v2-4b-g64", QuantMethod::GPTQ, 4, 64, false, false, true,
     "int4-g64-zp", false},
    {"awq-4b-g32", QuantMethod::AWQ, 4, 32, true, false, false, "int4-g32-zp",
     false},
};

void PrintTo(const Variant &v, std::ostream *os) { *os << v.name; }

struct Proj {
  const char *name;
  int64_t rows, cols; // tiny-mha: hidden 128, ffn 384
};
const Proj kProjs[] = {
    {"self_attn.q_proj", 128, 128}, {"self_attn.k_proj", 128, 128},
    {"self_attn.v_proj", 128, 128}, {"self_attn.o_proj", 128, 128},
    {"mlp.gate_proj", 384, 128},    {"mlp.up_proj", 384, 128},
    {"mlp.down_proj", 128, 384},
};

class ToolCheckpoint : public testing::TestWithParam<Variant> {};

TEST_P(ToolCheckpoint, DequantizesExactlyAsTheTool) {
  const Variant &v = GetParam();
  std::string dir = fixtures() + "/quant/tiny-mha-" + v.name;
  std::string configPath = dir + "/model/config.json";
  std::string text = readText(configPath);
  ASSERT_FALSE(text.empty())
      << configPath << " (KILN_FIXTURES "
      << (std::getenv("KILN_FIXTURES") ? "set" : "unset") << ")";
  auto cfg = readQuantizationConfig(text, configPath);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_TRUE(cfg->has_value());
  const QuantizationConfig &c = **cfg;
  EXPECT_EQ(c.method, v.method);
  EXPECT_EQ(c.bits, v.bits);
  EXPECT_EQ(c.groupSize, v.groupSize);
  EXPECT_EQ(c.sym, v.sym);
  EXPECT_EQ(c.descAct, v.descAct);
  EXPECT_EQ(c.gptqV2, v.gptqV2);
  EXPECT_TRUE(c.zeroPoint);
  if (v.method == QuantMethod::GPTQ) {
    // GPTQModel's quantize_config.json (its "format" spelling) agrees.
    std::string qc = dir + "/model/quantize_config.json";
    auto again = readQuantizationConfig(
        "{\"quantization_config\": " + readText(qc) + "}", qc);
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_TRUE(again->has_value());
    EXPECT_EQ((*again)->gptqV2, v.gptqV2);
    EXPECT_EQ((*again)->groupSize, v.groupSize);
  }

  auto weights = WeightSet::open(dir + "/model");
  ASSERT_TRUE(weights.ok()) << weights.status();
  auto reference = SafeTensorsFile::open(dir + "/dequantized.safetensors");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const auto &meta = (*reference)->metadata();
  for (const Proj &p : kProjs) {
    std::string module = std::string("model.layers.0.") + p.name;
    auto m = readQuantizedLinear(**weights, module, c, p.rows, p.cols);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->format.name(), v.format) << module;
    EXPECT_EQ(!m->gIdx.empty(), v.gIdx) << module;
    EXPECT_EQ(m->zeros.empty(), !m->format.zeroPoints) << module;
    std::vector<float> w(p.rows * p.cols);
    m->dequantize(w.data());

    // The first rows element by element, for a readable failure...
    std::string name = module + ".weight";
    const TensorView *ref = (*reference)->find(name);
    ASSERT_NE(ref, nullptr) << name;
    ASSERT_EQ(ref->dtype, DType::F32);
    ASSERT_EQ(ref->shape.size(), 2u);
    ASSERT_EQ(ref->shape[1], p.cols);
    ASSERT_LE(ref->shape[0], p.rows);
    int bad = 0;
    std::ostringstream first;
    for (int64_t i = 0; i < ref->numElements(); ++i) {
      float want;
      std::memcpy(&want, ref->data + 4 * i, 4);
      if (bitsOf(w[i]) != bitsOf(want) && bad++ < 5)
        first << "\n  [" << i / p.cols << ", " << i % p.cols << "]: kiln "
              << w[i] << ", the tool " << want;
    }
    EXPECT_EQ(bad, 0) << name << ": " << bad << " differ" << first.str();
    // ...and every element through the full matrix's hash.
    ASSERT_EQ(meta.count(name + ".rows"), 1u) << name;
    EXPECT_EQ(meta.at(name + ".rows"), std::to_string(p.rows));
    ASSERT_EQ(meta.count(name + ".fnv1a"), 1u) << name;
    std::string bytes(reinterpret_cast<const char *>(w.data()), w.size() * 4);
    EXPECT_EQ(Fnv1a().add(bytes).hex(), meta.at(name + ".fnv1a")) << name;
  }
  // Layer 1 reads too (no reference here: the logits in expected.safetensors
  // cover the whole model).
  for (const Proj &p : kProjs) {
    auto m = readQuantizedLinear(
        **weights, std::string("model.layers.1.") + p.name, c, p.rows, p.cols);
    EXPECT_TRUE(m.ok()) << m.status();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ToolCheckpoint, testing::ValuesIn(kVariants),
                         [](const testing::TestParamInfo<Variant> &info) {
                           std::string n = info.param.name;
                           for (char &ch : n)
                             if (ch == '-')
                               ch = '_';
                           return n;
                         });

// --- config.json ------------------------------------------------------------

/// readQuantizationConfig's message for a quantization_config, or "ok".
std::string configError(const std::string &qc) {
  auto c = readQuantizationConfig(
      "{\"model_type\": \"llama\", \"quantization_config\": " + qc + "}",
      "m/config.json");
  return c.ok() ? std::string("ok") : std::string(c.status().message());
}

TEST(QuantizationConfig, AbsentIsNone) {
  auto c = readQuantizationConfig(R"({"model_type": "llama"})", "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->has_value());
  c = readQuantizationConfig(R"({"quantization_config": null})", "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->has_value());
}

TEST(QuantizationConfig, Fields) {
  auto c = readQuantizationConfig(
      R"({"quantization_config": {"quant_method": "gptq", "bits": 8,
          "group_size": -1, "sym": false, "desc_act": true,
          "checkpoint_format": "gptq_v2", "static_groups": false,
          "damp_percent": 0.01, "pack_dtype": "int32", "lm_head": false,
          "meta": {"quantizer": ["gptqmodel:4.2.5"]}}})",
      "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->method, QuantMethod::GPTQ);
  EXPECT_EQ((*c)->bits, 8);
  EXPECT_EQ((*c)->groupSize, -1);
  EXPECT_FALSE((*c)->sym);
  EXPECT_TRUE((*c)->descAct);
  EXPECT_TRUE((*c)->gptqV2);
  EXPECT_EQ((*c)->describe(), "8-bit GPTQ");
  // Defaults: transformers' GPTQConfig (group 128, sym, no act-order, v1).
  c = readQuantizationConfig(
      R"({"quantization_config": {"quant_method": "gptq", "bits": 4}})", "c");
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->groupSize, 128);
  EXPECT_TRUE((*c)->sym);
  EXPECT_FALSE((*c)->descAct);
  EXPECT_FALSE((*c)->gptqV2);
  // AutoAWQ's spelling; version is case-insensitive as in transformers.
  c = readQuantizationConfig(
      R"({"quantization_config": {"quant_method": "awq", "bits": 4,
          "group_size": 64, "zero_point": true, "version": "GEMM",
          "modules_to_not_convert": null}})",
      "c");
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->method, QuantMethod::AWQ);
  EXPECT_EQ((*c)->groupSize, 64);
  EXPECT_EQ((*c)->describe(), "4-bit AWQ");
}

TEST(QuantizationConfig, BadConfigs) {
  const std::string p = "m/config.json: quantization_config";
  EXPECT_EQ(configError("[]"), p + " is not a JSON object");
  EXPECT_EQ(configError(R"({"bits": 4})"), p + " has no 'quant_method'");
  EXPECT_EQ(configError(R"({"quant_method": "bitsandbytes", "bits": 4})"),
            p + ".quant_method is 'bitsandbytes'; kiln reads pre-quantized "
                "'gptq' and 'awq' checkpoints");
  EXPECT_EQ(configError(R"({"quant_method": 3})"),
            p + ".quant_method must be a string, not 3");
  EXPECT_EQ(configError(R"({"quant_method": "gptq"})"), p + " has no 'bits'");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 3})"),
            p + ".bits is 3; kiln reads 4- and 8-bit GPTQ checkpoints");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": "4"})"),
            p + ".bits must be an integer, not \"4\"");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4.5})"),
            p + ".bits must be an integer, not 4.5");
  EXPECT_EQ(configError(R"({"quant_method": "awq", "bits": 8})"),
            p + ".bits is 8; AWQ's GEMM format is 4-bit");
  EXPECT_EQ(
      configError(R"({"quant_method": "gptq", "bits": 4, "group_size": 0})"),
      p + ".group_size must be a positive integer or -1 (the whole row), not "
          "0");
  EXPECT_EQ(
      configError(R"({"quant_method": "gptq", "bits": 4, "group_size": -2})"),
      p + ".group_size must be a positive integer or -1 (the whole row), not "
          "-2");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4, "sym": "yes"})"),
            p + ".sym must be true or false, not \"yes\"");
  EXPECT_EQ(
      configError(R"({"quant_method": "gptq", "bits": 4, "desc_act": 1})"),
      p + ".desc_act must be true or false, not 1");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4,
                            "checkpoint_format": "marlin"})"),
            p + ".checkpoint_format is 'marlin'; kiln reads 'gptq' (v1) and "
                "'gptq_v2'");
  EXPECT_EQ(configError(
                R"({"quant_method": "gptq", "bits": 4, "format": "bitblas"})"),
            p + ".format is 'bitblas'; kiln reads 'gptq' (v1) and 'gptq_v2'");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4,
                            "is_marlin_format": true})"),
            p + ".is_marlin_format is true; kiln reads the 'gptq' packing, "
                "not Marlin's");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4,
                            "pack_dtype": "int16"})"),
            p + ".pack_dtype is 'int16'; kiln reads GPTQ packed in int32 "
                "words");
  EXPECT_EQ(
      configError(R"({"quant_method": "gptq", "bits": 4, "lm_head": true})"),
      p + ".lm_head is true; kiln reads checkpoints whose lm_head is not "
          "quantized");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4,
                            "dynamic": {"-:.*down_proj": {}}})"),
            p + ".dynamic (per-module overrides) is set; kiln reads one "
                "format for every module");
  EXPECT_EQ(configError(R"({"quant_method": "gptq", "bits": 4,
                            "dynamic": {}})"),
            "ok");
  for (const char *version : {"gemv", "exllama", "marlin", "gemv_fast"})
    EXPECT_EQ(configError(std::string(R"({"quant_method": "awq", "bits": 4,
                            "version": ")") +
                          version + "\"}"),
              p + ".version is '" + version +
                  "'; kiln reads AutoAWQ's 'gemm' packing only");
  EXPECT_EQ(configError(R"({"quant_method": "awq", "bits": 4,
                            "zero_point": false})"),
            p + ".zero_point is false; AutoAWQ's GEMM format always has zero "
                "points");
  EXPECT_EQ(configError(R"({"quant_method": "awq", "bits": 4,
                            "backend": "llm-awq"})"),
            p + ".backend is 'llm-awq'; kiln reads AutoAWQ's packing "
                "('autoawq')");
  auto c = readQuantizationConfig("{", "m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(std::string(c.status().message())
                .rfind("m/config.json: not "
                       "valid JSON: ",
                       0),
            0u)
      << c.status();
}

// --- Modules packed here ----------------------------------------------------

// A [16, 64] module in groups of 32: 2 groups; code, zero point and scale of
// every element from simple formulas, so that the test states W itself.
constexpr int64_t kRows = 16, kCols = 64, kGroup = 32, kGroups = 2;
int code(int64_t r, int64_t c, int bits) {
  return int((3 * r + 5 * c + r * c) % (1 << bits));
}
int zeroPoint(int64_t g, int64_t r, int bits) {
  return int(1 + (7 * r + 3 * g) % ((1 << bits) - 1)); // 1..2^bits - 1
}
uint16_t scaleBits(int64_t g, int64_t r) {
  return floatToHalf(0.01f * float(1 + r + 17 * g));
}

/// The tensors of one module, named <module>.<suffix>.
struct Packed {
  std::vector<int32_t> qweight, qzeros, gIdx;
  std::vector<uint16_t> scales;
  std::vector<int64_t> qweightShape, qzerosShape, scalesShape, gIdxShape;
};

/// GPTQ's packing (AutoGPTQ's QuantLinear.pack, GPTQModel's pack_block):
/// qweight[k / f][n] |= code << bits * (k % f); qzeros[g][n / f] |= (zero
/// - 1 for v1) << bits * (n % f); g_idx = group of each input.
Packed packGptq(int bits, bool v1, const std::vector<int32_t> &gIdx) {
  const int f = 32 / bits;
  Packed p;
  std::vector<uint32_t> qw(kCols / f * kRows, 0), qz(kGroups * kRows / f, 0);
  for (int64_t k = 0; k < kCols; ++k)
    for (int64_t n = 0; n < kRows; ++n)
      qw[k / f * kRows + n] |= uint32_t(code(n, k, bits)) << (bits * (k % f));
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t n = 0; n < kRows; ++n)
      qz[g * (kRows / f) + n / f] |=
          uint32_t(zeroPoint(g, n, bits) - (v1 ? 1 : 0)) << (bits * (n % f));
  p.qweight.assign(qw.begin(), qw.end());
  p.qzeros.assign(qz.begin(), qz.end());
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t n = 0; n < kRows; ++n)
      p.scales.push_back(scaleBits(g, n));
  p.gIdx = gIdx;
  p.qweightShape = {kCols / f, kRows};
  p.qzerosShape = {kGroups, kRows / f};
  p.scalesShape = {kGroups, kRows};
  p.gIdxShape = {kCols};
  return p;
}

/// AutoAWQ's packing (WQLinear_GEMM.from_linear): for word j and i < 8,
/// qweight[k][j] |= code(8j + AWQ_ORDER[i], k) << 4i, qzeros alike.
Packed packAwq() {
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  Packed p;
  std::vector<uint32_t> qw(kCols * kRows / 8, 0), qz(kGroups * kRows / 8, 0);
  for (int64_t k = 0; k < kCols; ++k)
    for (int64_t j = 0; j < kRows / 8; ++j)
      for (int i = 0; i < 8; ++i)
        qw[k * (kRows / 8) + j] |= uint32_t(code(8 * j + order[i], k, 4))
                                   << (4 * i);
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t j = 0; j < kRows / 8; ++j)
      for (int i = 0; i < 8; ++i)
        qz[g * (kRows / 8) + j] |= uint32_t(zeroPoint(g, 8 * j + order[i], 4))
                                   << (4 * i);
  p.qweight.assign(qw.begin(), qw.end());
  p.qzeros.assign(qz.begin(), qz.end());
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t n = 0; n < kRows; ++n)
      p.scales.push_back(scaleBits(g, n));
  p.qweightShape = {kCols, kRows / 8};
  p.qzerosShape = {kGroups, kRows / 8};
  p.scalesShape = {kGroups, kRows};
  return p;
}

std::vector<int32_t> plainGIdx() {
  std::vector<int32_t> g(kCols);
  for (int64_t c = 0; c < kCols; ++c)
    g[c] = int32_t(c / kGroup);
  return g;
}

/// An act-order map: every group holds kGroup columns, interleaved.
std::vector<int32_t> actOrderGIdx() {
  std::vector<int32_t> g(kCols);
  for (int64_t c = 0; c < kCols; ++c)
    g[c] = int32_t((c * 37) % kCols / kGroup); // 37: coprime to 64
  int ones = 0;
  for (int32_t v : g)
    ones += v;
  EXPECT_EQ(ones, kGroup); // balanced, as act-order's permutation is
  return g;
}

const char *kModule = "model.layers.0.mlp.up_proj";

/// Writes `p` (tensors left empty are left out) as dir/model.safetensors.
void write(const test::TempDir &dir, const Packed &p,
           DType scalesType = DType::F16, DType qweightType = DType::I32) {
  std::vector<OutTensor> t;
  std::string m = kModule;
  std::vector<float> wideScales;
  if (!p.qweight.empty())
    t.push_back(
        {m + ".qweight", qweightType, p.qweightShape, p.qweight.data()});
  if (!p.qzeros.empty())
    t.push_back({m + ".qzeros", DType::I32, p.qzerosShape, p.qzeros.data()});
  if (!p.scales.empty()) {
    if (scalesType == DType::F32) {
      for (uint16_t s : p.scales)
        wideScales.push_back(halfToFloat(s));
      t.push_back(
          {m + ".scales", DType::F32, p.scalesShape, wideScales.data()});
    } else {
      t.push_back({m + ".scales", scalesType, p.scalesShape, p.scales.data()});
    }
  }
  if (!p.gIdx.empty())
    t.push_back({m + ".g_idx", DType::I32, p.gIdxShape, p.gIdx.data()});
  ASSERT_TRUE(writeSafeTensors(dir.file("model.safetensors"), t).ok());
}

QuantizationConfig gptqConfig(int bits, bool v2 = false, bool descAct = false) {
  QuantizationConfig c;
  c.method = QuantMethod::GPTQ;
  c.bits = bits;
  c.groupSize = kGroup;
  c.gptqV2 = v2;
  c.descAct = descAct;
  return c;
}

QuantizationConfig awqConfig() {
  QuantizationConfig c;
  c.method = QuantMethod::AWQ;
  c.bits = 4;
  c.groupSize = kGroup;
  return c;
}

/// readQuantizedLinear on dir's file: the matrix, or its message.
absl::StatusOr<QuantizedMatrix> read(const test::TempDir &dir,
                                     const QuantizationConfig &c,
                                     int64_t rows = kRows,
                                     int64_t cols = kCols) {
  auto w = WeightSet::open(dir.file(""));
  if (!w.ok())
    return w.status();
  return readQuantizedLinear(**w, kModule, c, rows, cols);
}

std::string error(const test::TempDir &dir, const QuantizationConfig &c,
                  int64_t rows = kRows, int64_t cols = kCols) {
  auto m = read(dir, c, rows, cols);
  return m.ok() ? std::string("ok") : std::string(m.status().message());
}

/// Every W[r, c] is (code - zero) * scale of the formulas above.
void expectFormulas(const QuantizedMatrix &m, int bits,
                    const std::vector<int32_t> &gIdx) {
  std::vector<float> w(kRows * kCols);
  m.dequantize(w.data());
  int bad = 0;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      int64_t g = gIdx.empty() ? c / kGroup : gIdx[c];
      float want = float(code(r, c, bits) - zeroPoint(g, r, bits)) *
                   halfToFloat(scaleBits(g, r));
      if (bitsOf(w[r * kCols + c]) != bitsOf(want) && bad++ < 5)
        ADD_FAILURE() << "[" << r << ", " << c << "]: " << w[r * kCols + c]
                      << ", expected " << want;
    }
  EXPECT_EQ(bad, 0);
}

TEST(QuantizedLinear, GptqV1AndV2) {
  for (int bits : {4, 8})
    for (bool v2 : {false, true}) {
      SCOPED_TRACE(testing::Message() << bits << "-bit, v2 " << v2);
      test::TempDir dir;
      write(dir, packGptq(bits, !v2, plainGIdx()));
      auto m = read(dir, gptqConfig(bits, v2));
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ(m->format.name(), bits == 4 ? "int4-g32-zp" : "int8-g32-zp");
      EXPECT_TRUE(m->gIdx.empty()); // the plain map is dropped
      ASSERT_EQ(m->codes.size(), size_t(kRows * kCols));
      EXPECT_EQ(m->codes[5 * kCols + 7], code(5, 7, bits));
      EXPECT_EQ(m->zeros[3 * kGroups + 1], zeroPoint(1, 3, bits));
      EXPECT_EQ(m->scales[3 * kGroups + 1], scaleBits(1, 3));
      expectFormulas(*m, bits, {});
    }
}

TEST(QuantizedLinear, GptqWithoutGIdx) {
  test::TempDir dir;
  write(dir, packGptq(4, true, {})); // optional without desc_act
  auto m = read(dir, gptqConfig(4));
  ASSERT_TRUE(m.ok()) << m.status();
  expectFormulas(*m, 4, {});
}

TEST(QuantizedLinear, GptqActOrderKeepsGIdx) {
  test::TempDir dir;
  std::vector<int32_t> g = actOrderGIdx();
  write(dir, packGptq(4, true, g));
  auto m = read(dir, gptqConfig(4, false, /*descAct=*/true));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->gIdx, g);
  expectFormulas(*m, 4, g);
  // A non-plain g_idx is kept with desc_act false too: it decides the groups.
  m = read(dir, gptqConfig(4));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->gIdx, g);
}

TEST(QuantizedLinear, SymmetricZerosAreTheMiddle) {
  // GPTQ's sym checkpoints store zero point 8 (v1: 7): no zero points.
  test::TempDir dir;
  Packed p = packGptq(4, true, plainGIdx());
  std::fill(p.qzeros.begin(), p.qzeros.end(), int32_t(0x77777777));
  write(dir, p);
  auto m = read(dir, gptqConfig(4));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format.name(), "int4-g32");
  EXPECT_TRUE(m->zeros.empty());
  EXPECT_EQ(m->value(2, 3),
            float(code(2, 3, 4) - 8) * halfToFloat(scaleBits(0, 2)));
  // 8-bit: 128 (v1 0x7f7f7f7f).
  test::TempDir dir8;
  Packed q = packGptq(8, true, {});
  std::fill(q.qzeros.begin(), q.qzeros.end(), int32_t(0x7f7f7f7f));
  write(dir8, q);
  m = read(dir8, gptqConfig(8));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format.name(), "int8-g32");
  EXPECT_EQ(m->value(2, 40),
            float(code(2, 40, 8) - 128) * halfToFloat(scaleBits(1, 2)));
}

TEST(QuantizedLinear, Awq) {
  test::TempDir dir;
  write(dir, packAwq());
  auto m = read(dir, awqConfig());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format.name(), "int4-g32-zp");
  EXPECT_TRUE(m->gIdx.empty());
  // Output 1 is field 4 of word 0, output 2 field 1 (AWQ_ORDER).
  uint32_t w0 = uint32_t(packAwq().qweight[0]);
  EXPECT_EQ(m->codes[1 * kCols + 0], (w0 >> 16) & 15);
  EXPECT_EQ(m->codes[2 * kCols + 0], (w0 >> 4) & 15);
  expectFormulas(*m, 4, {});
}

// --- Bad modules ------------------------------------------------------------

TEST(QuantizedLinear, MissingTensors) {
  const std::string m = kModule;
  for (const char *which : {"qweight", "qzeros", "scales"}) {
    test::TempDir dir;
    Packed p = packGptq(4, true, plainGIdx());
    if (std::string(which) == "qweight")
      p.qweight.clear();
    if (std::string(which) == "qzeros")
      p.qzeros.clear();
    if (std::string(which) == "scales")
      p.scales.clear();
    write(dir, p);
    EXPECT_EQ(error(dir, gptqConfig(4)), dir.file("model.safetensors") +
                                             ": missing tensor '" + m + "." +
                                             which + "'");
  }
  test::TempDir dir;
  write(dir, packGptq(4, true, {}));
  EXPECT_EQ(error(dir, gptqConfig(4, false, /*descAct=*/true)),
            dir.file("model.safetensors") + ": missing tensor '" + m +
                ".g_idx' (desc_act is true)");
}

TEST(QuantizedLinear, WrongDtypesAndShapes) {
  const std::string m = kModule;
  test::TempDir dir;
  const std::string f = dir.file("model.safetensors") + ": tensor '" + m;
  const std::string what = "4-bit GPTQ of a [16, 64] weight with group size 32";
  const std::string layout = what + " stores ";
  Packed p = packGptq(4, true, plainGIdx());
  {
    Packed q = p;
    q.qweight.resize(q.qweight.size() / 2); // F16: half the bytes
    write(dir, q, DType::F16, DType::F16);
    EXPECT_EQ(error(dir, gptqConfig(4)),
              f + ".qweight' has dtype F16; " + what + " stores it as I32");
  }
  for (DType t : {DType::F32, DType::BF16}) {
    write(dir, p, t);
    EXPECT_EQ(error(dir, gptqConfig(4)), f + ".scales' has dtype " +
                                             dtypeName(t) + "; " + what +
                                             " stores it as F16");
  }
  {
    Packed q = p;
    q.qweightShape = {kRows, kCols / 8}; // AWQ's orientation
    write(dir, q);
    EXPECT_EQ(error(dir, gptqConfig(4)),
              f + ".qweight' has shape [16, 8]; " + layout + "[8, 16]");
  }
  {
    Packed q = p;
    q.qzerosShape = {kGroups * kRows / 8, 1};
    write(dir, q);
    EXPECT_EQ(error(dir, gptqConfig(4)),
              f + ".qzeros' has shape [4, 1]; " + layout + "[2, 2]");
  }
  {
    Packed q = p;
    q.scalesShape = {kRows, kGroups}; // transposed
    write(dir, q);
    EXPECT_EQ(error(dir, gptqConfig(4)),
              f + ".scales' has shape [16, 2]; " + layout + "[2, 16]");
  }
  {
    Packed q = p;
    q.gIdx.resize(kCols / 2);
    q.gIdxShape = {kCols / 2};
    write(dir, q);
    EXPECT_EQ(error(dir, gptqConfig(4)),
              f + ".g_idx' has shape [32]; " + layout + "[64]");
  }
  // The weight's shape decides: rows and cols swapped disagree with the file.
  write(dir, p);
  QuantizationConfig g16 = gptqConfig(4);
  g16.groupSize = 16;
  EXPECT_EQ(error(dir, g16, 64, 16),
            f + ".qweight' has shape [8, 16]; 4-bit GPTQ of a [64, 16] weight "
                "with group size 16 stores [2, 64]");
  // 8 bits read from a 4-bit file.
  EXPECT_EQ(error(dir, gptqConfig(8)),
            f + ".qweight' has shape [8, 16]; 8-bit GPTQ of a [16, 64] weight "
                "with group size 32 stores [16, 16]");
  // AWQ's shapes.
  write(dir, packAwq());
  EXPECT_EQ(error(dir, gptqConfig(4)),
            f + ".qweight' has shape [64, 2]; " + layout + "[8, 16]");
  write(dir, p);
  EXPECT_EQ(error(dir, awqConfig()),
            f + ".qweight' has shape [8, 16]; 4-bit AWQ of a [16, 64] weight "
                "with group size 32 stores [64, 2]");
}

TEST(QuantizedLinear, BadGroupsAndBits) {
  const std::string m = kModule;
  test::TempDir dir;
  write(dir, packGptq(4, true, plainGIdx()));
  const std::string f = dir.file("model.safetensors") + ": ";
  QuantizationConfig c = gptqConfig(4);
  c.groupSize = 48;
  EXPECT_EQ(error(dir, c), f +
                               "group size 48 does not divide the 64 input "
                               "features of '" +
                               m + "'");
  c.groupSize = 0;
  EXPECT_EQ(error(dir, c), f + "'" + m +
                               "': group size 0; a group size is positive or "
                               "-1 (the whole row)");
  c = gptqConfig(3);
  EXPECT_EQ(error(dir, c), f + "'" + m +
                               "': 3-bit GPTQ; kiln reads 4- or 8-bit GPTQ "
                               "and 4-bit AWQ");
  c = awqConfig();
  c.bits = 8;
  EXPECT_EQ(error(dir, c), f + "'" + m +
                               "': 8-bit AWQ; kiln reads 4- or 8-bit GPTQ "
                               "and 4-bit AWQ");
  EXPECT_EQ(error(dir, gptqConfig(4), 12, 64),
            f + "the 12 output features of '" + m +
                "' do not fill whole int32 words of 4-bit fields");
  c = gptqConfig(8);
  c.groupSize = -1;
  EXPECT_EQ(error(dir, c, 16, 66),
            f + "the 66 input features of '" + m +
                "' do not fill whole int32 words of 8-bit fields");
}

TEST(QuantizedLinear, BadGIdx) {
  const std::string m = kModule;
  test::TempDir dir;
  const std::string f = dir.file("model.safetensors") + ": tensor '" + m;
  std::vector<int32_t> g = plainGIdx();
  g[40] = 2;
  write(dir, packGptq(4, true, g));
  EXPECT_EQ(error(dir, gptqConfig(4, false, true)),
            f + ".g_idx' entry 40 is 2, outside the 2 groups [0, 2)");
  g[40] = -1;
  write(dir, packGptq(4, true, g));
  EXPECT_EQ(error(dir, gptqConfig(4)),
            f + ".g_idx' entry 40 is -1, outside the 2 groups [0, 2)");
  g[40] = 0; // group 0 gets 33 columns, group 1 31
  write(dir, packGptq(4, true, g));
  EXPECT_EQ(error(dir, gptqConfig(4, false, true)),
            f + ".g_idx' gives group 0 33 columns; GPTQ's groups hold "
                "exactly 32");
  std::fill(g.begin(), g.end(), 1); // group 0 empty
  write(dir, packGptq(4, true, g));
  EXPECT_EQ(error(dir, gptqConfig(4, false, true)),
            f + ".g_idx' gives group 0 0 columns; GPTQ's groups hold exactly "
                "32");
}

TEST(QuantizedLinear, V1ZeroOverflow) {
  // v1 stores zero - 1; a stored 15 (what packing zero 0 as -1 leaves) is
  // zero point 16, past 4-bit codes. v2 reads the same nibble as 15.
  const std::string m = kModule;
  test::TempDir dir;
  Packed p = packGptq(4, true, plainGIdx());
  p.qzeros[1 * (kRows / 8) + 0] |= int32_t(0xf) << 12; // group 1, output 3
  write(dir, p);
  EXPECT_EQ(error(dir, gptqConfig(4)),
            dir.file("model.safetensors") + ": tensor '" + m +
                ".qzeros' holds 15 for group 1, output 3: zero point 16 in v1 "
                "(stored + 1), past the 4-bit codes 0..15");
  auto v2 = read(dir, gptqConfig(4, /*v2=*/true));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->zeros[3 * kGroups + 1], 15);
  // 8-bit: stored 255.
  test::TempDir dir8;
  Packed q = packGptq(8, true, plainGIdx());
  q.qzeros[0] |= int32_t(0xff) << 8; // group 0, output 1
  write(dir8, q);
  EXPECT_EQ(error(dir8, gptqConfig(8)),
            dir8.file("model.safetensors") + ": tensor '" + m +
                ".qzeros' holds 255 for group 0, output 1: zero point 256 in "
                "v1 (stored + 1), past the 8-bit codes 0..255");
}

// --- Loading a pre-quantized folder (WeightSet, WeightProvider) -------------

TEST(PrequantizedFolder, KilnFormatOfEachVariant) {
  const char *formats[][2] = {
      {"gptq-4b-g32-sym", "int4-g32-zp"},
      {"gptq-4b-g128-asym", "int4-g128-zp"},
      {"gptq-4b-g32-actorder", "int4-g32-zp-act"},
      {"gptq-8b-row", "int8-zp"},
      {"gptq-v2-4b-g64", "int4-g64-zp"},
      {"awq-4b-g32", "int4-g32-zp"},
  };
  for (auto [variant, format] : formats) {
    auto w =
        WeightSet::open(fixtures() + "/quant/tiny-mha-" + variant + "/model");
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_NE((*w)->quantization(), nullptr) << variant;
    EXPECT_EQ((*w)->quantization()->format().name(), format) << variant;
  }
  // A float folder has none.
  auto f16 = WeightSet::open(fixtures() + "/tiny-mha/model");
  ASSERT_TRUE(f16.ok()) << f16.status();
  EXPECT_EQ((*f16)->quantization(), nullptr);
}

TEST(PrequantizedFolder, CheckTakesTheModulesInTheirFormat) {
  std::string dir = fixtures() + "/quant/tiny-mha-gptq-4b-g32-sym/model";
  auto w = WeightSet::open(dir);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_TRUE((*w)->prequantized(q));
  EXPECT_FALSE((*w)->prequantized("model.norm.weight"));
  QuantFormat format = *QuantFormat::parse("int4-g32-zp");
  EXPECT_TRUE(
      (*w)->check({{q, {128, 128}, format}, {"model.norm.weight", {128}}})
          .ok());
  std::string origin = dir + "/model.safetensors";
  EXPECT_EQ((*w)->check({{q, {128, 128}}}).message(),
            origin + ": weight '" + q +
                "' is stored pre-quantized (4-bit GPTQ, "
                "'model.layers.0.self_attn.q_proj.qweight', kiln's "
                "int4-g32-zp); the model was compiled for float weights: "
                "compile it from this checkpoint");
  EXPECT_EQ(
      (*w)->check({{q, {128, 128}, QuantFormat::parse("int4-g128")}}).message(),
      origin + ": weight '" + q +
          "' is stored pre-quantized (4-bit GPTQ, "
          "'model.layers.0.self_attn.q_proj.qweight', kiln's "
          "int4-g32-zp); the model was compiled to hold it as "
          "int4-g128: compile it from this checkpoint");
  // The shape the model needs is the module's: qweight disagrees.
  EXPECT_EQ((*w)->check({{q, {128, 256}, format}}).message(),
            origin +
                ": tensor 'model.layers.0.self_attn.q_proj.qweight' has shape "
                "[16, 128]; 4-bit GPTQ of a [128, 256] weight with group size "
                "32 stores [32, 128]");
}

TEST(PrequantizedFolder, PackStacksTheModulesRows) {
  // q, k and v of layer 0 in one buffer, with the norm beside: the
  // modules' rows one after the other, a symmetric module's zeros the
  // middle code, act-order's shared g_idx kept.
  for (const char *variant : {"gptq-4b-g32-sym", "gptq-4b-g32-actorder"}) {
    auto w =
        WeightSet::open(fixtures() + "/quant/tiny-mha-" + variant + "/model");
    ASSERT_TRUE(w.ok()) << w.status();
    const QuantizationConfig &cfg = *(*w)->quantization();
    const std::string p = "model.layers.0.self_attn.";
    WeightBuffer b{p + "qkv",
                   {{p + "q_proj.weight", {128, 128}},
                    {p + "k_proj.weight", {128, 128}},
                    {p + "v_proj.weight", {128, 128}}},
                   128,
                   "model.layers.0.input_layernorm.weight",
                   cfg.format()};
    auto packed = WeightProvider::checkpoint(**w).pack(b);
    ASSERT_TRUE(packed.ok()) << variant << ": " << packed.status();
    EXPECT_EQ(int64_t(packed->size()), weightBufferBytes(b)) << variant;

    QuantizedMatrix want;
    want.format = cfg.format();
    want.rows = 384;
    want.cols = 128;
    for (const char *m : {"q_proj", "k_proj", "v_proj"}) {
      auto q = readQuantizedLinear(**w, p + m, cfg, 128, 128);
      ASSERT_TRUE(q.ok()) << q.status();
      want.codes.insert(want.codes.end(), q->codes.begin(), q->codes.end());
      want.scales.insert(want.scales.end(), q->scales.begin(), q->scales.end());
      if (q->zeros.empty())
        want.zeros.resize(want.zeros.size() + 128 * 4, 8);
      else
        want.zeros.insert(want.zeros.end(), q->zeros.begin(), q->zeros.end());
      want.gIdx = q->gIdx;
    }
    EXPECT_EQ(want.gIdx.empty(), !cfg.descAct) << variant;
    std::vector<float> g(128);
    (*w)->find("model.layers.0.input_layernorm.weight")->toFloat(g.data());
    std::vector<uint16_t> norm;
    for (float x : g)
      norm.push_back(floatToHalf(x));
    EXPECT_TRUE(*packed == packForKernels(want, norm.data())) << variant;
  }
}

} // namespace
