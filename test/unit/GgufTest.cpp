// The GGUF reader, ggml's dequantizers and the llama mapping, against the
// `gguf` Python package (test/fixtures/gguf, made by
// test/fixtures/make_gguf_fixture.py) and against hand-made files for
// every fault the reader must refuse.
#include "runtime/GgmlBlocks.h"
#include "runtime/GgufFile.h"
#include "runtime/GgufModel.h"
#include "runtime/SafeTensors.h"
#include "runtime/Weights.h"

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace kiln;

namespace {

std::string fixtures() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures") + "/gguf/";
}

/// Writes GGUF files field by field, little-endian.
struct Builder {
  std::string b;
  Builder &u32(uint32_t v) { return raw(&v, 4); }
  Builder &u64(uint64_t v) { return raw(&v, 8); }
  Builder &str(const std::string &s) {
    u64(s.size());
    b += s;
    return *this;
  }
  Builder &raw(const void *p, size_t n) {
    b.append(static_cast<const char *>(p), n);
    return *this;
  }
  Builder &pad(size_t align) {
    while (b.size() % align)
      b += '\0';
    return *this;
  }
};

/// A valid file: two metadata keys, tensors a (F32 [8]) and b (F16 [16])
/// at data offsets 0 and 32. The hooks change one field each.
struct Layout {
  uint32_t version = 3;
  uint64_t tensors = 2, keys = 2;
  uint32_t archType = 8; // string
  uint32_t dimsA = 1;
  uint64_t neA = 8;
  uint32_t typeA = 0; // F32
  uint64_t offsetA = 0, offsetB = 32;
  std::string nameB = "b";
  uint64_t dataBytes = 64;
};

std::string build(const Layout &l) {
  Builder g;
  g.raw("GGUF", 4).u32(l.version).u64(l.tensors).u64(l.keys);
  g.str("general.architecture").u32(l.archType).str("llama");
  g.str("general.alignment").u32(4).u32(32);
  g.str("a").u32(l.dimsA);
  for (uint32_t d = 0; d < l.dimsA; ++d)
    g.u64(l.neA);
  g.u32(l.typeA).u64(l.offsetA);
  g.str(l.nameB).u32(1).u64(16).u32(1).u64(l.offsetB);
  g.pad(32);
  g.b.append(l.dataBytes, '\x01');
  return g.b;
}

std::string writeTemp(const std::string &bytes) {
  static int n = 0;
  std::string path = ::testing::TempDir() + "/gguf-test-" +
                     std::to_string(getpid()) + "-" + std::to_string(n++) +
                     ".gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

absl::StatusOr<std::unique_ptr<GgufFile>> openBytes(const std::string &b) {
  return GgufFile::open(writeTemp(b));
}

std::string errorOf(const std::string &bytes) {
  auto f = openBytes(bytes);
  return f.ok() ? "(opened)" : std::string(f.status().message());
}

TEST(GgufFile, ReadsAValidFile) {
  auto f = openBytes(build({}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->alignment(), 32u);
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const GgufTensor *b = (*f)->tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::F16);
  EXPECT_EQ(b->bytes, 32u);
  EXPECT_EQ(b->data - (*f)->tensor("a")->data, 32);
  EXPECT_EQ(*(*f)->find("general.architecture")->string(), "llama");
  EXPECT_EQ(*(*f)->find("general.alignment")->integer(), 32);
}

// The bad-input matrix: each fault is refused with a line naming it.
TEST(GgufFile, RefusesEveryFault) {
  struct Case {
    const char *what;
    std::string bytes;
    const char *expect;
  };
  auto with = [](auto change) {
    Layout l;
    change(l);
    return build(l);
  };
  std::string wrongMagic = build({});
  wrongMagic[0] = 'X';
  std::vector<Case> cases = {
      {"wrong magic", wrongMagic, "no 'GGUF' magic"},
      {"version 1", with([](Layout &l) { l.version = 1; }), "version 1"},
      {"big-endian", with([](Layout &l) { l.version = 3u << 24; }),
       "big-endian"},
      {"huge tensor count",
       with([](Layout &l) { l.tensors = uint64_t(1) << 60; }),
       "tensor count 1152921504606846976 is more than"},
      {"huge key count", with([](Layout &l) { l.keys = ~uint64_t(0); }),
       "metadata count"},
      {"value type out of range", with([](Layout &l) { l.archType = 13; }),
       "value type id 13 is out of range"},
      {"ggml type out of range", with([](Layout &l) { l.typeA = 99; }),
       "tensor 'a': type id 99 is not a ggml type"},
      {"too many dims", with([](Layout &l) { l.dimsA = 5; }), "5 dimensions"},
      {"zero dim", with([](Layout &l) { l.neA = 0; }),
       "dimension 0 (0) is zero or overflows"},
      {"element overflow", with([](Layout &l) {
         l.dimsA = 3;
         l.neA = uint64_t(1) << 22;
       }),
       "overflows the element count"},
      {"partial block", with([](Layout &l) {
         l.typeA = 2; // Q4_0: 32 values a block
       }),
       "not whole Q4_0 blocks of 32"},
      {"misaligned offset", with([](Layout &l) { l.offsetB = 36; }),
       "offset 36 is not a multiple of the alignment (32)"},
      {"tensor past the end", with([](Layout &l) { l.offsetB = 64; }),
       "tensor 'b' (32 bytes at data offset 64) runs past the end"},
      {"overlapping tensors", with([](Layout &l) { l.offsetB = 0; }),
       "tensors 'a' and 'b' overlap"},
      {"duplicate tensor", with([](Layout &l) { l.nameB = "a"; }),
       "tensor 'a' appears twice"},
      {"huge byte size", with([](Layout &l) {
         l.dimsA = 2;
         l.neA = uint64_t(1) << 20;
       }),
       "runs past the end"},
  };
  for (const Case &c : cases) {
    std::string error = errorOf(c.bytes);
    EXPECT_NE(error.find(c.expect), std::string::npos)
        << c.what << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
}

TEST(GgufFile, RefusesBadMetadata) {
  auto file = [](auto addKeys, uint64_t keys) {
    Builder g;
    g.raw("GGUF", 4).u32(3).u64(0).u64(keys);
    addKeys(g);
    return g.b;
  };
  EXPECT_NE(errorOf(file(
                        [](Builder &g) {
                          g.str("k").u32(9).u32(9).u64(1); // array of arrays
                        },
                        1))
                .find("arrays of arrays"),
            std::string::npos);
  EXPECT_NE(errorOf(file(
                        [](Builder &g) {
                          g.str("k").u32(9).u32(6).u64(uint64_t(1) << 61);
                        },
                        1))
                .find("f32 values run past the end"),
            std::string::npos);
  EXPECT_NE(errorOf(file(
                        [](Builder &g) {
                          g.u64(uint64_t(1) << 40).b += std::string(16, 'k');
                        },
                        1))
                .find("string length 1099511627776 runs past the end"),
            std::string::npos);
  EXPECT_NE(errorOf(file(
                        [](Builder &g) {
                          g.str("k").u32(4).u32(1);
                          g.str("k").u32(4).u32(2);
                        },
                        2))
                .find("metadata 'k' appears twice"),
            std::string::npos);
  EXPECT_NE(
      errorOf(
          file([](Builder &g) { g.str("general.alignment").u32(4).u32(24); },
               1))
          .find("not a u32 power of two"),
      std::string::npos);
}

// Every prefix of a valid file is refused cleanly (AddressSanitizer
// watches the sanitized run).
TEST(GgufFile, RefusesEveryTruncation) {
  std::string whole = build({});
  for (size_t n = 0; n < whole.size(); ++n) {
    auto f = openBytes(whole.substr(0, n));
    EXPECT_FALSE(f.ok()) << "a prefix of " << n << " bytes opened";
  }
}

// ggml's blocks dequantized exactly as gguf-py does, bit for bit.
TEST(GgmlBlocks, DequantizeAsTheGgufPackage) {
  auto cases = SafeTensorsFile::open(fixtures() + "dequant-cases.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.status();
  int checked = 0;
  for (const char *name : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
                           "Q5_1", "Q4_K", "Q5_K", "Q6_K"}) {
    const TensorView *blocks = (*cases)->find(std::string(name) + ".blocks");
    const TensorView *values = (*cases)->find(std::string(name) + ".values");
    ASSERT_TRUE(blocks && values) << name;
    std::optional<GgmlType> type;
    for (uint32_t id = 0; id < 64 && !type; ++id)
      if (auto info = ggmlTypeInfo(id); info && std::string(info->name) == name)
        type = GgmlType(id);
    ASSERT_TRUE(type) << name;
    const int64_t n = values->numElements();
    ASSERT_EQ(ggmlBytes(*type, n), blocks->numBytes) << name;
    std::vector<float> got(n);
    ggmlDequantize(*type, blocks->data, n, got.data());
    for (int64_t i = 0; i < n; ++i) {
      float want;
      std::memcpy(&want, values->data + 4 * i, 4);
      ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0)
          << name << " value " << i << ": " << got[i] << " vs " << want;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

// Every block type in its canonical form, and in the forms a file that
// mixes it with others takes (int8 codes, f32 scales and mins, groups of
// 16): every value the one ggml dequantizes (equal as floats: code * scale
// - min gives +0 where ggml's (q - 8) * d may give -0).
TEST(GgufModel, CanonicalFormsHoldTheValuesExactly) {
  auto cases = SafeTensorsFile::open(fixtures() + "dequant-cases.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.status();
  QuantFormat widest{QuantKind::Int8, 16};
  widest.mins = true;
  int checked = 0;
  for (auto [name, type] : {std::pair{"Q8_0", GgmlType::Q8_0},
                            {"Q5_0", GgmlType::Q5_0},
                            {"Q4_0", GgmlType::Q4_0},
                            {"Q4_1", GgmlType::Q4_1},
                            {"Q5_1", GgmlType::Q5_1},
                            {"Q4_K", GgmlType::Q4_K},
                            {"Q5_K", GgmlType::Q5_K},
                            {"Q6_K", GgmlType::Q6_K}}) {
    const TensorView *blocks = (*cases)->find(std::string(name) + ".blocks");
    const TensorView *values = (*cases)->find(std::string(name) + ".values");
    ASSERT_TRUE(blocks && values);
    const int64_t cols = ggmlTypeInfo(type).blockElements == 256 ? 256 : 64,
                  rows = values->numElements() / cols;
    ASSERT_EQ(rows * cols, values->numElements()) << name;
    const QuantFormat natural = *ggmlCanonicalFormat(type);
    std::vector<QuantFormat> forms = {natural, widest};
    if (!natural.mins) // the symmetric types widen without mins too
      forms.push_back(QuantFormat{QuantKind::Int8, 32});
    for (const QuantFormat &f : forms) {
      ASSERT_EQ(joinExact(natural, f), f) << name << " into " << f.name();
      QuantizedMatrix m = ggmlToCanonical(type, blocks->data, rows, cols, f);
      std::vector<float> got(rows * cols);
      m.dequantize(got.data());
      for (int64_t i = 0; i < rows * cols; ++i) {
        float want;
        std::memcpy(&want, values->data + 4 * i, 4);
        ASSERT_EQ(got[i], want) << name << " as " << f.name() << " value " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 19);
}

// The formats a file that mixes block types takes.
TEST(GgufModel, JoinsFormats) {
  auto of = [](GgmlType t) { return *ggmlCanonicalFormat(t); };
  auto join = [&](GgmlType a, GgmlType b) {
    auto f = joinExact(of(a), of(b));
    return f ? f->name() : "none";
  };
  EXPECT_EQ(of(GgmlType::Q4_K).name(), "int4-g32-min");
  EXPECT_EQ(of(GgmlType::Q6_K).name(), "int8-g16-min");
  EXPECT_EQ(join(GgmlType::Q4_0, GgmlType::Q8_0), "int8-g32");
  EXPECT_EQ(join(GgmlType::Q4_0, GgmlType::Q4_K), "int4-g32-min");
  EXPECT_EQ(join(GgmlType::Q4_K, GgmlType::Q6_K), "int8-g16-min"); // Q4_K_M
  EXPECT_EQ(join(GgmlType::Q5_K, GgmlType::Q4_1), "int8-g32-min");
  EXPECT_EQ(joinExact(of(GgmlType::Q4_K), QuantFormat{QuantKind::FP8}),
            std::nullopt);
  QuantFormat g48{QuantKind::Int8, 48};
  EXPECT_EQ(joinExact(of(GgmlType::Q4_K), g48), std::nullopt);
}

TEST(GgufModel, ReadsTheFixturesConfig) {
  auto f = GgufFile::open(fixtures() + "tiny-gqa-Q4_0.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  auto c = ggufLlamaConfig(**f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hiddenSize, 64);
  EXPECT_EQ(c->intermediateSize, 192);
  EXPECT_EQ(c->numLayers, 2);
  EXPECT_EQ(c->numHeads, 4);
  EXPECT_EQ(c->numKVHeads, 2);
  EXPECT_EQ(c->vocabSize, 320);
  EXPECT_EQ(c->maxPositions, 128);
  EXPECT_FLOAT_EQ(float(c->rmsNormEps), 1e-5f);
  auto formats = ggufProjectionFormats(**f);
  ASSERT_TRUE(formats);
  EXPECT_EQ(formats->size(), 15u); // 7 projections, 2 layers, the LM head
  EXPECT_EQ(formats->at("lm_head.weight").name(), "int4-g32"); // Q4_0
  EXPECT_EQ(describeFormats(*formats), "int4-g32");
  EXPECT_EQ(ggufProjectionBlockTypes(**f), "Q4_0");
  auto q41 = GgufFile::open(fixtures() + "tiny-gqa-Q4_1.gguf");
  ASSERT_TRUE(q41.ok());
  EXPECT_EQ(describeFormats(*ggufProjectionFormats(**q41)), "int4-g32-min");
  // Q4_K_M: a buffer with a Q6_K tensor takes int8-g16-min, the others
  // int4-g32-min; q, k and v (gate and up) always share one.
  auto q4km = GgufFile::open(fixtures() + "tiny-dh128-Q4_K_M.gguf");
  ASSERT_TRUE(q4km.ok());
  auto mixed = ggufProjectionFormats(**q4km);
  ASSERT_TRUE(mixed);
  EXPECT_EQ(describeFormats(*mixed), "int4-g32-min, int8-g16-min");
  // Its output.weight is Q6_K: the LM head in its own format.
  EXPECT_EQ(mixed->at("lm_head.weight").name(), "int8-g16-min");
  // Float projections (F16) leave every weight float, the head too.
  auto f16 = GgufFile::open(fixtures() + "tiny-gqa-F16.gguf");
  ASSERT_TRUE(f16.ok());
  EXPECT_FALSE(ggufProjectionFormats(**f16));
  for (int layer = 0; layer < 2; ++layer) {
    auto at = [&](const std::string &module) {
      return mixed->at(
          absl::StrCat("model.layers.", layer, ".", module, ".weight"));
    };
    auto tensor = [&](const char *name) {
      return (*q4km)->tensor(absl::StrCat("blk.", layer, ".", name, ".weight"));
    };
    QuantFormat qkv = at("self_attn.q_proj");
    EXPECT_EQ(at("self_attn.k_proj"), qkv);
    EXPECT_EQ(at("self_attn.v_proj"), qkv);
    EXPECT_EQ(at("mlp.up_proj"), at("mlp.gate_proj"));
    const bool v6 = tensor("attn_v")->type == GgmlType::Q6_K;
    EXPECT_EQ(qkv.name(), v6 ? "int8-g16-min" : "int4-g32-min") << layer;
    const bool down6 = tensor("ffn_down")->type == GgmlType::Q6_K;
    EXPECT_EQ(at("mlp.down_proj").name(),
              down6 ? "int8-g16-min" : "int4-g32-min")
        << layer;
  }
}

TEST(GgufModel, MapsNames) {
  EXPECT_EQ(ggufToHuggingFaceName("blk.12.ffn_down.weight"),
            "model.layers.12.mlp.down_proj.weight");
  EXPECT_EQ(ggufToHuggingFaceName("blk.0.attn_output.weight"),
            "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(ggufToHuggingFaceName("output.weight"), "lm_head.weight");
  EXPECT_EQ(ggufToHuggingFaceName("token_embd.weight"),
            "model.embed_tokens.weight");
  for (const char *none : {"blk.01.attn_q.weight", "blk.x.attn_q.weight",
                           "blk.1.attn_qq.weight", "rope_freqs.weight", "blk."})
    EXPECT_EQ(ggufToHuggingFaceName(none), "") << none;
}

/// A fixture file with one metadata value's bytes replaced: `key`'s u32
/// value (found by its name in the file) set to `value`.
std::string patchedU32(const std::string &file, const std::string &key,
                       uint32_t value) {
  std::ifstream in(fixtures() + file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string b = s.str();
  size_t at = b.find(key);
  EXPECT_NE(at, std::string::npos) << key;
  uint32_t type;
  std::memcpy(&type, &b[at + key.size()], 4);
  EXPECT_EQ(type, 4u) << key << " is not a u32";
  std::memcpy(&b[at + key.size() + 4], &value, 4);
  return writeTemp(b);
}

TEST(GgufModel, RefusesShapesThatDisagreeWithTheHyperparameters) {
  // feed_forward_length 256 where the tensors hold 192.
  std::string path =
      patchedU32("tiny-gqa-Q4_0.gguf", "llama.feed_forward_length", 256);
  auto weights = WeightSet::open(path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  QuantFormat f{QuantKind::Int4, 32};
  absl::Status s = (*weights)->check(
      {{"model.layers.0.mlp.gate_proj.weight", {256, 64}, f}});
  EXPECT_NE(std::string(s.message())
                .find("tensor 'blk.0.ffn_gate.weight' has shape [192, 64], "
                      "the config needs [256, 64]"),
            std::string::npos)
      << s;
  // Odd things in the metadata itself.
  auto file = GgufFile::open(
      patchedU32("tiny-gqa-Q4_0.gguf", "llama.attention.head_count_kv", 3));
  ASSERT_TRUE(file.ok());
  EXPECT_NE(std::string(ggufLlamaConfig(**file).status().message())
                .find("llama.attention.head_count_kv (3) does not divide "
                      "llama.attention.head_count (4)"),
            std::string::npos);
  file = GgufFile::open(
      patchedU32("tiny-gqa-Q4_0.gguf", "llama.block_count", 1u << 30));
  ASSERT_TRUE(file.ok());
  EXPECT_NE(std::string(ggufLlamaConfig(**file).status().message())
                .find("llama.block_count is 1073741824, but block 2 has 0 "
                      "of its 9 tensors"),
            std::string::npos);
  file = GgufFile::open(
      patchedU32("tiny-gqa-Q4_0.gguf", "llama.embedding_length", 128));
  ASSERT_TRUE(file.ok());
  EXPECT_NE(std::string(ggufLlamaConfig(**file).status().message())
                .find("llama.embedding_length (128) differs from "
                      "token_embd.weight's rows of 64"),
            std::string::npos);
  file = GgufFile::open(
      patchedU32("tiny-gqa-Q4_0.gguf", "llama.rope.dimension_count", 8));
  ASSERT_TRUE(file.ok());
  EXPECT_NE(std::string(ggufLlamaConfig(**file).status().message())
                .find("llama.rope.dimension_count (8) is not the head "
                      "dimension (16)"),
            std::string::npos);
}

TEST(GgufModel, RefusesTensorsItWouldLeaveOut) {
  // A tensor of block 0 that is none of Llama 2's (a bias, say): the model
  // would run without it.
  std::ifstream in(fixtures() + "tiny-gqa-Q4_0.gguf", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string b = bytes.str();
  size_t at = b.find("blk.0.attn_norm.weight");
  ASSERT_NE(at, std::string::npos);
  b.replace(at, 22, "blk.0.attn_q_bias.abcd");
  auto file = GgufFile::open(writeTemp(b));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_NE(std::string(ggufLlamaConfig(**file).status().message())
                .find("tensor 'blk.0.attn_q_bias.abcd' is not one of a Llama "
                      "2 block's"),
            std::string::npos);
}

TEST(GgufModel, ReadsBlockTypesInCanonicalForm) {
  // Q4_1 is read as int4-g32-min, each value as llama.cpp dequantizes it;
  // its TensorView still reads it as floats.
  auto weights = WeightSet::open(fixtures() + "tiny-gqa-Q4_1.gguf");
  ASSERT_TRUE(weights.ok()) << weights.status();
  const std::string name = "model.layers.1.self_attn.q_proj.weight";
  EXPECT_TRUE((*weights)->prequantized(name));
  const QuantFormat format = *QuantFormat::parse("int4-g32-min");
  ASSERT_TRUE((*weights)->check({{name, {64, 64}, format}}).ok());
  const TensorView *t = (*weights)->find(name);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::Q4_1);
  EXPECT_EQ(t->name, "blk.1.attn_q.weight");
  auto q = (*weights)->readQuantized(name, 64, 64);
  ASSERT_TRUE(q.ok()) << q.status();
  std::vector<float> want(64 * 64), got(64 * 64);
  t->toFloat(want.data());
  q->dequantize(got.data());
  EXPECT_EQ(got, want);
  // Compiled for another format, or as floats: compile it from the file.
  for (std::optional<QuantFormat> other :
       {std::optional<QuantFormat>(QuantFormat{}),
        std::optional<QuantFormat>()}) {
    absl::Status s = (*weights)->check({{name, {64, 64}, other}});
    EXPECT_NE(std::string(s.message())
                  .find("is stored pre-quantized (tensor 'blk.1.attn_q.weight' "
                        "is Q4_1, kiln's int4-g32-min)"),
              std::string::npos)
        << s;
  }
}

} // namespace
