// The tokenizer of a GGUF file, rebuilt from its metadata alone, against
// SentencePiece's own encoding and decoding with the original
// tokenizer.model (test/fixtures/gguf/tokenizer-cases.json, made by
// test/fixtures/make_gguf_fixture.py with the sentencepiece package).
#include "tokenizer/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace kiln;

namespace {

std::string fixtures() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures") + "/gguf/";
}

TEST(GgufVocab, EncodesAndDecodesAsSentencePiece) {
  std::ifstream in(fixtures() + "tokenizer-cases.json");
  ASSERT_TRUE(in) << fixtures() << "tokenizer-cases.json";
  nlohmann::json cases = nlohmann::json::parse(in);
  int encoded = 0, decoded = 0;
  for (auto &[model, c] : cases["tokenizers"].items()) {
    std::string error;
    std::string file = fixtures() + model + "-F16.gguf";
    auto t = Tokenizer::open(file, c["vocab_size"].get<int64_t>(), error);
    ASSERT_TRUE(t) << error;
    EXPECT_EQ(t->eos(), c["eos_id"].get<int>());
    for (auto &e : c["encode"]) {
      std::string text = e["text"];
      std::vector<int32_t> want = {c["bos_id"].get<int32_t>()};
      for (auto &id : e["ids"])
        want.push_back(id.get<int32_t>());
      EXPECT_EQ(t->encode(text), want) << model << ": '" << text << "'";
      ++encoded;
    }
    for (auto &d : c["decode"]) {
      std::vector<int32_t> ids = d["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(t->decode(ids), d["text"].get<std::string>()) << model;
      ++decoded;
    }
  }
  EXPECT_GE(encoded, 30);
  EXPECT_GE(decoded, 20);
}

/// A GGUF file with only the given metadata (string keys and values, and
/// tokenizer.ggml.tokens when `tokens` is not empty).
std::string fileWith(const std::vector<std::pair<std::string, std::string>> &kv,
                     const std::vector<std::string> &tokens) {
  std::string b = "GGUF";
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<char *>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<char *>(&v), 8); };
  auto str = [&](const std::string &s) {
    u64(s.size());
    b += s;
  };
  u32(3);
  u64(0);
  u64(kv.size() + !tokens.empty());
  for (auto &[k, v] : kv) {
    str(k);
    u32(8);
    str(v);
  }
  if (!tokens.empty()) {
    str("tokenizer.ggml.tokens");
    u32(9);
    u32(8);
    u64(tokens.size());
    for (auto &t : tokens)
      str(t);
  }
  std::string path = ::testing::TempDir() + "/gguf-vocab-" +
                     std::to_string(getpid()) + "-" + std::to_string(b.size()) +
                     ".gguf";
  std::ofstream(path, std::ios::binary) << b;
  return path;
}

TEST(GgufVocab, RefusesFilesWithoutALlamaTokenizer) {
  std::string error;
  std::string none = fileWith({{"general.architecture", "llama"}}, {});
  EXPECT_FALSE(Tokenizer::present(none));
  EXPECT_FALSE(Tokenizer::open(none, 512, error));
  EXPECT_NE(error.find("has no tokenizer (tokenizer.ggml.tokens): give the "
                       "prompt as --prompt-ids"),
            std::string::npos)
      << error;
  std::string gpt2 =
      fileWith({{"tokenizer.ggml.model", "gpt2"}}, {"a", "b", "c"});
  EXPECT_FALSE(Tokenizer::open(gpt2, 512, error));
  EXPECT_NE(error.find("tokenizer.ggml.model is 'gpt2'; kiln reads 'llama'"),
            std::string::npos)
      << error;
}

} // namespace
