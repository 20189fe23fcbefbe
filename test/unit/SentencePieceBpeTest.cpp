//===- SentencePieceBpeTest.cpp - the runtime's tokenizer, id for id ------===//
//
// SentencePieceBpe (runtime/, no libsentencepiece) against libsentencepiece
// (kiln's Tokenizer) on the fixtures' Llama-style tokenizer.model files:
// the ids of the SentencePiece Python package's cases
// (test/fixtures/gguf/tokenizer-cases.json) and of 2000 random texts
// (words, runs of spaces, newlines and tabs, accents, CJK, emoji, bytes
// that are no UTF-8), and the text of random id sequences (byte pieces
// that make or break characters, control pieces, the unknown piece) must
// be libsentencepiece's exactly. Models it does not read are refused by
// name.
//
//===----------------------------------------------------------------------===//
#include "runtime/SentencePieceBpe.h"
#include "tokenizer/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <random>

namespace kiln {
namespace {

std::string fixtures() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures");
}

/// A random text from pieces that stress the tokenizer.
std::string randomText(std::mt19937 &rng) {
  static const char *parts[] = {"the",    " ",
                                "  ",     "model",
                                "reads",  "numbers",
                                "\n",     "\t",
                                "é",      "ü",
                                "日本語", "😀",
                                "<s>",    "</s>",
                                "[INST]", "a",
                                "b",      "zz",
                                "42",     ".",
                                ",",      "Hello",
                                "world",  "\xff",
                                "\xc3",   "\xe2\x96\x81",
                                "  x  ",  "'s"};
  std::uniform_int_distribution<int> count(0, 12),
      pick(0, int(std::size(parts)) - 1);
  std::string s;
  for (int n = count(rng); n > 0; --n)
    s += parts[pick(rng)];
  return s;
}

class SentencePieceBpeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePieceBpeTest, IdsAndTextAreLibsentencepieces) {
  const std::string name = GetParam();
  const std::string path = fixtures() + "/gguf/" + name + "-tokenizer.model";
  std::string error;
  auto reference = Tokenizer::openFile(path, 1 << 20, error);
  ASSERT_TRUE(reference) << error;
  auto native = SentencePieceBpe::open(path);
  ASSERT_TRUE(native.ok()) << native.status();
  const SentencePieceBpe &t = **native;
  EXPECT_EQ(t.bos(), reference->bos());
  EXPECT_EQ(t.eos(), reference->eos());

  std::ifstream in(fixtures() + "/gguf/tokenizer-cases.json");
  nlohmann::json cases = nlohmann::json::parse(in)["tokenizers"][name];
  for (const nlohmann::json &c : cases["encode"]) {
    const std::string text = c["text"];
    EXPECT_EQ(t.encodeText(text), c["ids"].get<std::vector<int32_t>>())
        << "'" << text << "'";
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = randomText(rng);
    std::vector<int32_t> ids = reference->encodeText(text);
    ASSERT_EQ(t.encodeText(text), ids) << "'" << text << "'";
    ASSERT_EQ(t.decode(ids), reference->decode(ids)) << "'" << text << "'";
  }
  std::uniform_int_distribution<int32_t> id(0, int32_t(t.pieces()) + 3);
  std::uniform_int_distribution<int> length(0, 10);
  for (int i = 0; i < 2000; ++i) {
    std::vector<int32_t> ids(length(rng));
    for (int32_t &x : ids)
      x = id(rng);
    ASSERT_EQ(t.decode(ids), reference->decode(ids)) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SentencePieceBpeTest,
                         ::testing::Values("tiny-gqa", "tiny-mha"));

TEST(SentencePieceBpe, RefusesWhatItDoesNotRead) {
  // Not a ModelProto, and a unigram model (the proto's default type).
  auto junk = SentencePieceBpe::fromProto("\xff\xff\xff", "junk.model");
  EXPECT_EQ(junk.status().message(),
            "junk.model: not a SentencePiece model kiln-run reads (malformed)");
  // One piece "a" (field 1: {piece = "a"}), no trainer spec: unigram.
  auto unigram =
      SentencePieceBpe::fromProto(std::string("\x0a\x03\x0a\x01\x61", 5), "u");
  EXPECT_EQ(unigram.status().message(),
            "u: not a SentencePiece model kiln-run reads (model type 1; "
            "Llama's tokenizers are BPE, type 2)");
  auto missing = SentencePieceBpe::open("/nonexistent/tokenizer.model");
  EXPECT_EQ(missing.status().message(),
            "/nonexistent/tokenizer.model: cannot be read");
}

} // namespace
} // namespace kiln
