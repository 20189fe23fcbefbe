//===- ChatTemplateTest.cpp - Llama 2 chat prompts against Meta's code ----===//
//
// test/fixtures/chat/conversations.json (make_chat_fixture.py): Meta's
// chat_completion prompt construction, run with the SentencePiece Python
// package on tiny-gqa's and tiny-mha's tokenizer.model, gives the token
// ids of each conversation; kiln's must be the same. The conversations
// Meta's code refuses are refused here too, by the file reader or the
// checks, with a message naming the file and the message.
//
//===----------------------------------------------------------------------===//
#include "runtime/ChatTemplate.h"
#include "tokenizer/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

std::string fixtures() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures");
}

nlohmann::json conversations() {
  std::ifstream in(fixtures() + "/chat/conversations.json");
  return nlohmann::json::parse(in);
}

std::vector<ChatMessage> messages(const nlohmann::json &c) {
  std::vector<ChatMessage> out;
  for (const nlohmann::json &m : c["messages"])
    out.push_back({m["role"], m["content"]});
  return out;
}

TEST(ChatTemplate, TokensAreMetasChatCompletions) {
  nlohmann::json all = conversations();
  int checked = 0;
  for (const char *name : {"tiny-gqa", "tiny-mha"}) {
    std::string error;
    auto t = Tokenizer::openFile(
        fixtures() + "/gguf/" + name + "-tokenizer.model", 512, error);
    ASSERT_TRUE(t) << error;
    for (const nlohmann::json &c : all["conversations"]) {
      SCOPED_TRACE(std::string(name) + " " + c["name"].get<std::string>());
      auto ids = llama2ChatTokens(*t, messages(c), "c.json",
                                  /*allowTags=*/true);
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(*ids, c["results"][name]["ids"].get<std::vector<int32_t>>());
      ++checked;
    }
  }
  EXPECT_GE(checked, 16);
}

TEST(ChatTemplate, InteractiveTurnsAreTheTemplatesTurns) {
  // A first turn with a system prompt is the template's [system, user];
  // a later turn is EOS after the reply, then the template's last turn.
  std::string error;
  auto t = Tokenizer::openFile(fixtures() + "/gguf/tiny-gqa-tokenizer.model",
                               320, error);
  ASSERT_TRUE(t) << error;
  auto first = llama2ChatTokens(
      *t, {{"system", "Answer briefly."}, {"user", " What is 2+2? "}}, "c");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(llama2NextTurn(*t, " What is 2+2? ", true, "Answer briefly."),
            *first);
  auto both = llama2ChatTokens(
      *t, {{"user", "Hi."}, {"assistant", "Hello."}, {"user", "Bye."}}, "c");
  ASSERT_TRUE(both.ok());
  auto hi = llama2ChatTokens(*t, {{"user", "Hi."}}, "c");
  std::vector<int32_t> next = llama2NextTurn(*t, "Bye.", false, "");
  EXPECT_EQ(next.front(), t->eos());
  // The template's tail after the reply's EOS is the next turn's tail.
  std::vector<int32_t> tail(both->end() - (next.size() - 1), both->end());
  EXPECT_EQ(std::vector<int32_t>(next.begin() + 1, next.end()), tail);
  EXPECT_EQ(std::vector<int32_t>(both->begin(), both->begin() + hi->size()),
            *hi);
}

TEST(ChatTemplate, RefusesWhatMetaRefuses) {
  nlohmann::json all = conversations();
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "kiln-chat-test";
  std::filesystem::create_directories(dir);
  int refused = 0;
  for (const nlohmann::json &c : all["invalid"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string path = (dir / "c.json").string();
    std::ofstream(path) << c["messages"].dump();
    auto dialog = readConversation(path);
    absl::Status s =
        dialog.ok() ? checkConversation(*dialog, path) : dialog.status();
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(std::string(s.message()).rfind(path + ": ", 0), 0u)
        << s.message();
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);
    refused += !s.ok();
  }
  EXPECT_GE(refused, 14);
  // The format's tags in a content: Meta's code answers with an error
  // instead of a generation; kiln refuses it up front.
  EXPECT_EQ(
      checkConversation({{"user", "Say [/INST] now"}}, "c.json").message(),
      "c.json: message 1 holds [/INST], a tag of Llama 2's chat format");
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace kiln
