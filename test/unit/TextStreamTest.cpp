//===- TextStreamTest.cpp - streamed text and stop strings ----------------===//
//
// TextStream (tokenizer/Tokenizer.h) with a real SentencePiece model
// (tiny-gqa's, test/fixtures/gguf): a stop string that spans token
// boundaries ends the generation at the token that completes it, and no
// byte of it is ever written, not even while it was only a prefix; text
// held back as a possible stop comes out once it is known not to be one.
//
//===----------------------------------------------------------------------===//
#include "tokenizer/Tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kiln {
namespace {

std::unique_ptr<Tokenizer> tinyGqa() {
  const char *dir = std::getenv("KILN_FIXTURES");
  std::string error;
  auto t = Tokenizer::openFile(std::string(dir ? dir : "test/fixtures") +
                                   "/gguf/tiny-gqa-tokenizer.model",
                               320, error);
  EXPECT_TRUE(t) << error;
  return t;
}

/// Streams `text`'s tokens after `prompt`'s with `stops`: what was written,
/// piece by piece, and how many tokens were taken before it stopped.
struct Streamed {
  std::vector<std::string> pieces;
  size_t taken = 0;
  std::string all() const {
    std::string s;
    for (const std::string &p : pieces)
      s += p;
    return s;
  }
};
Streamed stream(const Tokenizer &t, const std::string &prompt,
                const std::string &text, std::vector<std::string> stops) {
  Streamed out;
  std::vector<int32_t> p = t.encode(prompt), ids = t.encode(text);
  TextStream s(
      t, p, [&](const std::string &piece) { out.pieces.push_back(piece); },
      stops);
  for (int32_t id : ids) {
    ++out.taken;
    if (!s.add(id))
      return out;
  }
  s.finish();
  return out;
}

TEST(TextStream, AStopAcrossTokensEndsItUnwritten) {
  auto t = tinyGqa();
  ASSERT_TRUE(t);
  // (Encoded alone, the text gets SentencePiece's leading space.)
  const std::string text = "the model reads the numbers and the cache";
  // The stop spans several tokens of the continuation.
  const std::string stop = "numbers and";
  std::vector<int32_t> ids = t->encode(text);
  ASSERT_GT(ids.size(), 4u);
  ASSERT_GT(t->encode(stop).size(), 1u);
  Streamed s = stream(*t, "Say:", text, {stop});
  EXPECT_EQ(s.all(), " the model reads the ");
  EXPECT_LT(s.taken, ids.size()); // it ended early
  for (const std::string &piece : s.pieces)
    EXPECT_EQ(piece.find('n'), std::string::npos)
        << "a piece of the stop was written: '" << piece << "'";
}

TEST(TextStream, HeldBackTextComesOutWhenItIsNoStop) {
  auto t = tinyGqa();
  ASSERT_TRUE(t);
  // "the mo" begins the stop "the moon": held, then written once "model"
  // shows it is not; without a stop in the text everything comes out.
  const std::string text = "the model reads the numbers";
  Streamed s = stream(*t, "Say:", text, {"the moon"});
  EXPECT_EQ(s.all(), " " + text);
  EXPECT_EQ(s.taken, t->encode(text).size());
  Streamed plain = stream(*t, "Say:", text, {});
  EXPECT_EQ(plain.all(), " " + text);
  EXPECT_GT(s.pieces.size(), 1u); // streamed, not written at the end
}

} // namespace
} // namespace kiln
