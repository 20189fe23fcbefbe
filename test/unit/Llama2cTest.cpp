// The llama2.c checkpoint reader, against the fixtures that llama2.c's own
// export code wrote (test/fixtures/llama2c, made by
// test/fixtures/make_llama2c_fixture.py) and against hand-made files for
// every fault the reader must refuse.
#include "runtime/Llama2cCheckpoint.h"
#include "runtime/SafeTensors.h"
#include "runtime/Weights.h"

#include <gtest/gtest.h>

#include <cmath>
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
  return std::string(dir ? dir : "test/fixtures") + "/";
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string writeTemp(const std::string &bytes) {
  static int n = 0;
  std::string path = ::testing::TempDir() + "/llama2c-test-" +
                     std::to_string(getpid()) + "-" + std::to_string(n++) +
                     ".bin";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string errorOf(const std::string &bytes) {
  auto f = Llama2cCheckpoint::open(writeTemp(bytes));
  return f.ok() ? "(opened)" : std::string(f.status().message());
}

/// A small checkpoint, field by field as export.py writes it; the hooks
/// change one field each. Tensor values are their index in the file, so
/// that a view at the wrong offset shows.
struct Layout {
  int version = 1; // 0, 1 or 2
  uint32_t magic = 0x616b3432;
  int32_t dim = 8, hidden = 16, layers = 2, heads = 2, kvHeads = 1;
  int32_t vocab = 12, seqLen = 4;
  uint8_t shared = 0; // versions 1 and 2
  int32_t groupSize = 8;
  int64_t extraBytes = 0; // appended (> 0) or cut (< 0)
};

std::string build(const Layout &l) {
  std::string b;
  auto i32 = [&](int32_t v) { b.append(reinterpret_cast<char *>(&v), 4); };
  auto f32 = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      float v = float(b.size() % 1000) / 1000.0f;
      b.append(reinterpret_cast<char *>(&v), 4);
    }
  };
  auto q80 = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      b += char(int8_t(i % 255 - 127));
    for (int64_t g = 0; g < n / l.groupSize; ++g) {
      float s = 0.001f * float(g + 1);
      b.append(reinterpret_cast<char *>(&s), 4);
    }
  };
  const bool shared = l.version == 0 ? l.vocab > 0 : l.shared != 0;
  const int64_t d = l.dim, hd = l.dim / l.heads, kv = l.kvHeads * hd;
  const int64_t v = std::abs(int64_t(l.vocab)), f = l.hidden, n = l.layers;
  if (l.version > 0) {
    b.append(reinterpret_cast<const char *>(&l.magic), 4);
    i32(l.version);
  }
  for (int32_t x :
       {l.dim, l.hidden, l.layers, l.heads, l.kvHeads, l.vocab, l.seqLen})
    i32(x);
  if (l.version > 0) {
    b += char(l.shared);
    if (l.version == 2)
      i32(l.groupSize);
    b.resize(256, '\0');
  }
  auto mat = [&](int64_t count) {
    if (l.version == 2)
      q80(count);
    else
      f32(count);
  };
  if (l.version == 0) {
    f32(v * d);
    f32(n * d);
    f32(n * (d * d + 2 * kv * d + d * d));
    f32(n * d);
    f32(n * 3 * f * d);
    f32(d);
    f32(2 * l.seqLen * (hd / 2));
    if (!shared)
      f32(v * d);
  } else {
    f32(2 * n * d + d);
    mat(v * d);
    for (int64_t count : {d * d, kv * d, kv * d, d * d, f * d, d * f, f * d})
      for (int64_t i = 0; i < n; ++i)
        mat(count);
    if (!shared)
      mat(v * d);
  }
  if (l.extraBytes > 0)
    b.append(size_t(l.extraBytes), '\0');
  else
    b.resize(b.size() - size_t(-l.extraBytes));
  return b;
}

template <typename F> std::string with(F change) {
  Layout l;
  change(l);
  return build(l);
}

/// A valid file of `version` with one int32 of its header overwritten:
/// field 0 is dim ... 6 seq_len, 7 the group size (version 2), -1 the
/// version. Legacy files have a separate classifier (vocab_size -12).
std::string patched(int version, int field, int32_t value) {
  std::string b = with([&](Layout &l) {
    l.version = version;
    l.vocab = version == 0 ? -12 : 12;
  });
  size_t at = version == 0 ? 4 * field : field == 7 ? 37 : 8 + 4 * field;
  std::memcpy(&b[at], &value, 4);
  return b;
}

TEST(Llama2cCheckpoint, ReadsEveryVersionOfAHandMadeFile) {
  for (int version : {0, 1, 2}) {
    for (bool shared : {false, true}) {
      Layout l;
      l.version = version;
      l.shared = shared;
      if (version == 0)
        l.vocab = shared ? 12 : -12;
      auto f = Llama2cCheckpoint::open(writeTemp(build(l)));
      ASSERT_TRUE(f.ok()) << version << " " << shared << ": " << f.status();
      const LlamaConfig &c = (*f)->config();
      EXPECT_EQ(c.hiddenSize, 8);
      EXPECT_EQ(c.intermediateSize, 16);
      EXPECT_EQ(c.numLayers, 2);
      EXPECT_EQ(c.numHeads, 2);
      EXPECT_EQ(c.numKVHeads, 1);
      EXPECT_EQ(c.vocabSize, 12);
      EXPECT_EQ(c.maxPositions, 4);
      EXPECT_EQ(c.tieWordEmbeddings, shared);
      EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
      EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
      // 1 embedding + 2 * 9 per layer + the final norm (+ the classifier).
      EXPECT_EQ((*f)->tensors().size(), 20u + !shared);
      const TensorView *k =
          (*f)->find("model.layers.1.self_attn.k_proj.weight");
      ASSERT_NE(k, nullptr);
      EXPECT_EQ(k->name, "wk[1]");
      EXPECT_EQ(k->shape, (std::vector<int64_t>{4, 8}));
      EXPECT_EQ(k->dtype, DType::F32);
      EXPECT_EQ(k->numBytes, 4u * 32);
      EXPECT_EQ((*f)->find("lm_head.weight") != nullptr, !shared);
    }
  }
}

// The bad-input matrix: each fault is refused with one line naming it.
TEST(Llama2cCheckpoint, RefusesEveryFault) {
  struct Case {
    const char *what;
    std::string bytes;
    const char *expect;
  };
  std::vector<Case> cases = {
      {"empty", "", "not a GGUF file or a llama2.c checkpoint: 0 bytes"},
      {"wrong magic", with([](Layout &l) { l.magic = 0x616b3433; }),
       "llama2.c legacy header (no 'ak42' magic): dim 1634415667 is larger "
       "than kiln reads"},
      {"version 3", with([](Layout &l) { l.version = 3; }),
       "llama2.c version 3 is not supported (versions 0, 1 and 2 are)"},
      {"negative version", patched(1, -1, -1),
       "llama2.c version -1 is not supported"},
      {"short header", build({}).substr(0, 100),
       "truncated: 100 bytes, shorter than the llama2.c version 1 header "
       "(256 bytes)"},
      {"truncated", with([](Layout &l) { l.extraBytes = -3; }),
       "needs 5792 bytes, the file has 5789: the file ends inside tensor "
       "'wcls'"},
      {"trailing bytes", with([](Layout &l) { l.extraBytes = 4; }),
       "needs 5792 bytes, the file has 5796"},
      {"hidden_dim disagrees with the file", patched(1, 1, 24),
       "llama2.c version 1 header (dim 8, hidden_dim 24, n_layers 2, n_heads "
       "2, n_kv_heads 1, vocab_size 12, seq_len 4, separate classifier) needs "
       "7328 bytes, the file has 5792: the file ends inside tensor 'w3[0]'"},
      {"vocab_size disagrees with the file", patched(0, 5, -13),
       "needs 5692 bytes, the file has 5628: the file ends inside tensor "
       "'wcls'"},
      {"shared flag disagrees with the file", patched(0, 5, 12),
       "llama2.c legacy header (no 'ak42' magic) (dim 8, hidden_dim 16, "
       "n_layers 2, n_heads 2, n_kv_heads 1, vocab_size 12, seq_len 4, shared "
       "classifier) needs 5244 bytes, the file has 5628"},
      {"huge dim", patched(1, 0, INT32_MAX),
       "llama2.c version 1 header: dim 2147483647 is larger than kiln reads "
       "(16777216)"},
      {"huge layer count", patched(1, 2, 1 << 24),
       "needs 39728448544 bytes, the file has 5792: the file ends inside "
       "tensor 'rms_att_weight[173]'"},
      {"huge dim in version 2", patched(2, 0, 1 << 24),
       "(dim 16777216, hidden_dim 16, n_layers 2, n_heads 2, n_kv_heads 1, "
       "vocab_size 12, seq_len 4, group_size 8, separate classifier) needs "},
      {"negative layers", patched(1, 2, -2), "n_layers is -2, not positive"},
      {"negative dim", patched(0, 0, -8), "dim is -8, not positive"},
      {"zero heads", patched(1, 3, 0), "n_heads is 0, not positive"},
      {"negative vocab in version 1", patched(1, 5, -12),
       "vocab_size is -12, not positive"},
      {"legacy vocab of INT32_MIN", patched(0, 5, INT32_MIN),
       "vocab_size 2147483648 is larger than kiln reads"},
      {"n_heads not dividing dim", patched(1, 3, 3),
       "n_heads (3) does not divide dim (8)"},
      {"n_kv_heads not dividing n_heads", patched(1, 4, 3),
       "n_kv_heads (3) does not divide n_heads (2)"},
      {"odd head dimension", patched(1, 3, 8),
       "head dimension 1 (dim / n_heads) is odd"},
      {"shared flag 2", with([](Layout &l) { l.shared = 2; }),
       "shared_classifier is 2, not 0 or 1"},
      {"group size 0", patched(2, 7, 0), "group_size 0 is not a positive size"},
      {"negative group size", patched(2, 7, -64),
       "group_size -64 is not a positive size"},
      {"a negative scale",
       [] {
         std::string b = with([](Layout &l) { l.version = 2; });
         // The first scale of wq[0]: after the norms, the embedding (96
         // values and 12 scales) and wq[0]'s 64 values.
         float s = -1.5f;
         std::memcpy(&b[256 + 4 * 40 + 96 + 4 * 12 + 64], &s, 4);
         return b;
       }(),
       "tensor 'wq[0]' group 0: scale -1.5 is not a non-negative number"},
      {"a scale that is not a number",
       [] {
         std::string b = with([](Layout &l) { l.version = 2; });
         float s = std::nanf("");
         std::memcpy(&b[256 + 4 * 40 + 96], &s, 4);
         return b;
       }(),
       "tensor 'token_embedding_table' group 0: scale nan"},
      {"group size not dividing", patched(2, 7, 5),
       "group_size 5 does not divide tensor 'token_embedding_table' (96 "
       "values)"},
  };
  for (const Case &c : cases) {
    std::string error = errorOf(c.bytes);
    EXPECT_NE(error.find(c.expect), std::string::npos)
        << c.what << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
}

// Every prefix of a valid file of each version is refused cleanly
// (AddressSanitizer watches the sanitized run).
TEST(Llama2cCheckpoint, RefusesEveryTruncation) {
  for (int version : {0, 1, 2}) {
    std::string whole = with([&](Layout &l) { l.version = version; });
    ASSERT_EQ(errorOf(whole), "(opened)");
    for (size_t n = 0; n < whole.size(); ++n)
      EXPECT_NE(errorOf(whole.substr(0, n)), "(opened)")
          << "version " << version << ": a prefix of " << n << " bytes";
  }
}

/// Meta's interleaved row of Hugging Face's rotate-half row `hf`.
int64_t metaRow(int64_t hf, int64_t headDim) {
  int64_t h = hf / headDim, r = hf % headDim, half = headDim / 2;
  return h * headDim + (r % half) * 2 + r / half;
}

// The fp32 fixtures hold the source model's weights, q/k rows in Meta's
// order: every value is checked against tiny-*/model.
TEST(Llama2cCheckpoint, ReadsTheFixturesAsTheirSourceModels) {
  struct Fixture {
    const char *file, *source;
    int version;
    bool shared;
  };
  for (const Fixture &x : {Fixture{"tiny-gqa-v0", "tiny-gqa", 0, false},
                           Fixture{"tiny-gqa-v0-shared", "tiny-gqa", 0, true},
                           Fixture{"tiny-mha-v1", "tiny-mha", 1, false}}) {
    auto f = Llama2cCheckpoint::open(fixtures() + "llama2c/" + x.file + ".bin");
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->header().version, x.version);
    EXPECT_EQ((*f)->config().tieWordEmbeddings, x.shared);
    auto src = SafeTensorsFile::open(fixtures() + x.source +
                                     "/model/model.safetensors");
    ASSERT_TRUE(src.ok()) << src.status();
    const LlamaConfig &c = (*f)->config();
    size_t compared = 0;
    for (const auto &[name, want] : (*src)->tensors()) {
      const TensorView *got = (*f)->find(name);
      if (x.shared && name == "lm_head.weight") {
        EXPECT_EQ(got, nullptr);
        continue;
      }
      ASSERT_NE(got, nullptr) << x.file << ": " << name;
      ASSERT_EQ(got->shape, want.shape) << name;
      const bool rope = name.find("q_proj") != std::string::npos ||
                        name.find("k_proj") != std::string::npos;
      const int64_t cols = want.shape.size() == 2 ? want.shape[1] : 1;
      for (int64_t row = 0; row < want.shape[0]; ++row) {
        const int64_t at = rope ? metaRow(row, c.headDim()) : row;
        ASSERT_EQ(std::memcmp(got->data + 4 * at * cols,
                              want.data + 4 * row * cols, 4 * cols),
                  0)
            << x.file << ": " << name << " row " << row;
      }
      ++compared;
    }
    EXPECT_EQ(compared, (*src)->tensors().size() - x.shared);
  }
}

// Version 2's matrices as runq.c dequantizes them: q * scale in f32, per
// group of the flattened tensor (the first and the last tensor of the
// file, from its raw bytes).
TEST(Llama2cCheckpoint, DequantizesVersion2AsRunq) {
  const std::string path = fixtures() + "llama2c/tiny-mha-v2.bin";
  auto f = Llama2cCheckpoint::open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const Llama2cHeader &h = (*f)->header();
  EXPECT_EQ(h.version, 2);
  EXPECT_EQ(h.groupSize, 64);
  EXPECT_FALSE(h.sharedClassifier);
  const std::string raw = readAll(path);
  const int64_t d = h.dim, v = h.vocabSize, n = v * d, gs = h.groupSize;
  struct At {
    const char *name;
    size_t offset;
  };
  const size_t first = 256 + 4 * (2 * h.nLayers * d + d);
  const size_t last = raw.size() - size_t(n + 4 * (n / gs));
  for (At at :
       {At{"model.embed_tokens.weight", first}, At{"lm_head.weight", last}}) {
    const TensorView *t = (*f)->find(at.name);
    ASSERT_NE(t, nullptr) << at.name;
    ASSERT_EQ(t->dtype, DType::F32);
    ASSERT_EQ(t->numBytes, size_t(4 * n));
    for (int64_t i = 0; i < n; ++i) {
      float scale, got;
      std::memcpy(&scale, &raw[at.offset + n + 4 * (i / gs)], 4);
      std::memcpy(&got, t->data + 4 * i, 4);
      ASSERT_EQ(got, float(int8_t(raw[at.offset + i])) * scale)
          << at.name << " value " << i;
    }
  }
}

TEST(Llama2cCheckpoint, OpensAsWeights) {
  auto w = WeightSet::open(fixtures() + "llama2c/tiny-gqa-v0.bin");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_NE((*w)->llama2c(), nullptr);
  EXPECT_EQ((*w)->gguf(), nullptr);
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  EXPECT_FALSE((*w)->prequantized(q));
  EXPECT_TRUE((*w)->check({{q, {64, 64}}, {"lm_head.weight", {320, 64}}}).ok());
  // A model of other shapes names the file's own tensor.
  absl::Status s = (*w)->check({{q, {128, 64}}});
  EXPECT_NE(std::string(s.message())
                .find("weight 'model.layers.1.self_attn.q_proj.weight' "
                      "(tensor 'wq[1]') has shape [64, 64], the config needs "
                      "[128, 64]"),
            std::string::npos)
      << s;
  // Without the classifier: a model that needs one is refused.
  auto shared = WeightSet::open(fixtures() + "llama2c/tiny-gqa-v0-shared.bin");
  ASSERT_TRUE(shared.ok()) << shared.status();
  s = (*shared)->check({{"lm_head.weight", {320, 64}}});
  EXPECT_NE(std::string(s.message()).find("missing weight 'lm_head.weight'"),
            std::string::npos)
      << s;
  // Any other file is read as llama2.c's, whose reader says what is wrong.
  auto text = WeightSet::open(fixtures() + "tiny-gqa/model/config.json");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(std::string(text.status().message())
                .find("config.json: llama2.c legacy header (no 'ak42' magic)"),
            std::string::npos)
      << text.status();
}

} // namespace
