// llama2.c's tokenizer.bin, rebuilt as a SentencePiece model, against
// SentencePiece's own encoding and decoding with the tokenizer.model it was
// exported from (test/fixtures/gguf/tokenizer-cases.json; the tokenizer.bin
// files are test/fixtures/llama2c's, made by llama2.c's tokenizer.py
// logic), and the faults of a truncated or garbled file.
#include "tokenizer/Llama2cVocab.h"
#include "tokenizer/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

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
  std::string path = ::testing::TempDir() + "/llama2c-vocab-" +
                     std::to_string(getpid()) + "-" + std::to_string(n++) +
                     ".bin";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Llama2cVocab, EncodesAndDecodesAsSentencePiece) {
  std::ifstream in(fixtures() + "gguf/tokenizer-cases.json");
  ASSERT_TRUE(in) << fixtures() << "gguf/tokenizer-cases.json";
  nlohmann::json cases = nlohmann::json::parse(in);
  int encoded = 0, decoded = 0;
  for (auto &[model, c] : cases["tokenizers"].items()) {
    std::string error;
    std::string file = fixtures() + "llama2c/" + model + "-tokenizer.bin";
    auto t = Tokenizer::openFile(file, c["vocab_size"].get<int64_t>(), error);
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

TEST(Llama2cVocab, InfersThePieceTypes) {
  SentencePieceSpec spec;
  std::string error;
  ASSERT_TRUE(readLlama2cVocab(fixtures() + "llama2c/tiny-gqa-tokenizer.bin",
                               spec, error))
      << error;
  ASSERT_EQ(spec.pieces.size(), 320u);
  EXPECT_EQ(spec.pieces[0].text, "<unk>");
  EXPECT_EQ(spec.pieces[0].type, PieceType::Unknown);
  EXPECT_EQ(spec.pieces[1].text, "<s>"); // "\n<s>\n" in the file
  EXPECT_EQ(spec.pieces[1].type, PieceType::Control);
  EXPECT_EQ(spec.pieces[2].text, "</s>");
  EXPECT_EQ(spec.pieces[2].type, PieceType::Control);
  EXPECT_EQ(spec.pieces[3].text, "<0x00>");
  EXPECT_EQ(spec.pieces[3 + 0x0A].text, "<0x0A>");
  int bytes = 0, spaces = 0;
  for (const Piece &p : spec.pieces) {
    bytes += p.type == PieceType::Byte;
    EXPECT_EQ(p.text.find(' '), std::string::npos) << p.text;
    spaces += p.text.find("\xE2\x96\x81") != std::string::npos;
  }
  EXPECT_EQ(bytes, 256);
  EXPECT_GT(spaces, 0); // spaces are SentencePiece's U+2581 again
}

/// A tokenizer.bin: max_token_length, then (score, length, bytes) pieces.
struct Bin {
  std::string b;
  explicit Bin(uint32_t maxLength) { raw(&maxLength, 4); }
  Bin &piece(const std::string &text, float score = 0, int32_t length = -1000) {
    int32_t n = length == -1000 ? int32_t(text.size()) : length;
    raw(&score, 4).raw(&n, 4);
    b += text;
    return *this;
  }
  Bin &raw(const void *p, size_t n) {
    b.append(static_cast<const char *>(p), n);
    return *this;
  }
};

std::string errorOf(const std::string &bytes, int64_t vocab) {
  std::string proto, error;
  return llama2cSentencePieceModel(writeTemp(bytes), vocab, proto, error)
             ? "(read)"
             : error;
}

// The bad-input matrix of tokenizer.bin: one line naming the file and the
// piece.
TEST(Llama2cVocab, RefusesGarbledFiles) {
  auto good = [] {
    return Bin(6)
        .piece("<unk>")
        .piece("\n<s>\n")
        .piece("\n</s>\n")
        .piece(" a", -1);
  };
  EXPECT_EQ(errorOf(good().b, 4), "(read)");
  struct Case {
    const char *what;
    std::string bytes;
    int64_t vocab;
    const char *expect;
  };
  const float nan = std::nanf("");
  std::vector<Case> cases = {
      {"empty", "", 4,
       "truncated: 0 bytes, shorter than tokenizer.bin's "
       "max_token_length"},
      {"cut inside a length", good().b.substr(0, good().b.size() - 7), 4,
       "truncated: the file ends inside piece 3's score and length"},
      {"cut inside a piece", good().b.substr(0, good().b.size() - 1), 4,
       "piece 3's length 2 runs past the end of the file"},
      {"negative length", good().piece("x", 0, -5).b, 5,
       "piece 4's length is -5"},
      {"empty piece", good().piece("", 0).b, 5, "piece 4's length is 0"},
      {"longer than max_token_length", good().piece("abcdefg").b, 5,
       "piece 4's length 7 is more than max_token_length (6)"},
      {"huge length", good().piece("x", 0, INT32_MAX).b, 5,
       "piece 4's length 2147483647 is more than max_token_length"},
      {"a score that is not a number", good().piece("b", nan).b, 5,
       "piece 4's score is not a finite number"},
      {"the same piece twice", good().piece(" a").b, 5,
       "pieces 3 and 4 are the same text"},
      {"too few pieces", Bin(6).piece("<unk>").piece("\n<s>\n").b, 2,
       "special token id 2 is not below 2"},
      {"vocabulary of another model", good().b, 320,
       "4 pieces, but the model's vocab_size is 320"},
  };
  for (const Case &c : cases) {
    std::string error = errorOf(c.bytes, c.vocab);
    EXPECT_NE(error.find(c.expect), std::string::npos)
        << c.what << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
  // Every prefix of a real file is refused (too few pieces at the least).
  std::string whole = readAll(fixtures() + "llama2c/tiny-gqa-tokenizer.bin");
  ASSERT_EQ(errorOf(whole, 320), "(read)");
  for (size_t n = 0; n < whole.size(); n += 7)
    EXPECT_NE(errorOf(whole.substr(0, n), 320), "(read)") << n;
}

TEST(Llama2cVocab, TheCheckpointHoldsNoTokenizer) {
  std::string error;
  const std::string model = fixtures() + "llama2c/tiny-gqa-v0.bin";
  EXPECT_FALSE(Tokenizer::present(model));
  EXPECT_FALSE(Tokenizer::open(model, 320, error));
  EXPECT_NE(error.find("tiny-gqa-v0.bin: a llama2.c checkpoint holds no "
                       "tokenizer: name its tokenizer.bin with --tokenizer"),
            std::string::npos)
      << error;
  // The tokenizer of another model.
  EXPECT_FALSE(Tokenizer::openFile(
      fixtures() + "llama2c/tiny-mha-tokenizer.bin", 320, error));
  EXPECT_NE(error.find("512 pieces, but the model's vocab_size is 320"),
            std::string::npos)
      << error;
  // A SentencePiece model named the same way is read as one.
  auto t = Tokenizer::openFile(fixtures() + "gguf/tiny-gqa-tokenizer.model",
                               320, error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->eos(), 2);
  EXPECT_FALSE(
      Tokenizer::openFile(fixtures() + "llama2c/none.bin", 320, error));
  EXPECT_NE(error.find("none.bin: no such tokenizer file"), std::string::npos);
}

} // namespace
