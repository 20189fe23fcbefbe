//===- ChatTemplate.cpp - Llama 2's chat prompts --------------------------===//
#include "runtime/ChatTemplate.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace kiln {
namespace {

// Meta's llama/generation.py.
constexpr const char *kInst = "[INST]", *kEndInst = "[/INST]";
constexpr const char *kSys = "<<SYS>>\n", *kEndSys = "\n<</SYS>>\n\n";
constexpr const char *kSpecialTags[] = {"[INST]", "[/INST]", "<<SYS>>",
                                        "<</SYS>>"};

/// Python's str.strip() of ASCII whitespace.
std::string strip(const std::string &s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

/// Meta's Tokenizer.encode(s, bos, eos).
std::vector<int32_t> encode(const TextTokenizer &t, const std::string &s,
                            bool bos, bool eos) {
  std::vector<int32_t> ids;
  if (bos)
    ids.push_back(t.bos());
  std::vector<int32_t> text = t.encodeText(s);
  ids.insert(ids.end(), text.begin(), text.end());
  if (eos)
    ids.push_back(t.eos());
  return ids;
}

} // namespace

absl::StatusOr<std::vector<ChatMessage>>
readConversation(const std::string &path) {
  auto fault = [&](const std::string &what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  std::ifstream in(path);
  if (!in)
    return fault("cannot be read");
  nlohmann::json json =
      nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded())
    return fault("not JSON");
  if (json.is_object() && json.contains("messages"))
    json = json["messages"];
  if (!json.is_array())
    return fault("not a conversation: a JSON array of {\"role\", "
                 "\"content\"} messages (or an object with \"messages\")");
  std::vector<ChatMessage> dialog;
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json &m = json[i];
    std::string which = absl::StrCat("message ", i + 1);
    if (!m.is_object())
      return fault(absl::StrCat(which, " is not an object"));
    for (const char *field : {"role", "content"}) {
      if (!m.contains(field))
        return fault(absl::StrCat(which, " has no \"", field, "\""));
      if (!m[field].is_string())
        return fault(absl::StrCat(which, "'s \"", field, "\" is not a string"));
    }
    dialog.push_back(
        {m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return dialog;
}

absl::Status addSystem(std::vector<ChatMessage> &dialog,
                       const std::string &system, const std::string &where) {
  if (system.empty())
    return absl::OkStatus();
  if (!dialog.empty() && dialog[0].role == "system")
    return absl::InvalidArgumentError(
        absl::StrCat("--system: ", where, " has a system message already"));
  dialog.insert(dialog.begin(), {"system", system});
  return absl::OkStatus();
}

absl::Status checkConversation(const std::vector<ChatMessage> &dialog,
                               const std::string &where, bool allowTags) {
  auto fault = [&](const std::string &what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  if (dialog.empty())
    return fault("the conversation has no messages");
  for (size_t i = 0; i < dialog.size(); ++i) {
    const ChatMessage &m = dialog[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return fault(absl::StrCat("message ", i + 1, "'s role '", m.role,
                                "' is not system, user or assistant"));
    for (const char *tag : kSpecialTags)
      if (!allowTags && m.content.find(tag) != std::string::npos)
        return fault(absl::StrCat("message ", i + 1, " holds ", tag,
                                  ", a tag of Llama 2's chat format"));
  }
  // After an optional system message: user, assistant, user, ... user.
  size_t first = dialog[0].role == "system" ? 1 : 0;
  if (first == dialog.size())
    return fault("a system message needs a user message after it");
  for (size_t i = first; i < dialog.size(); ++i) {
    const char *want = (i - first) % 2 == 0 ? "user" : "assistant";
    if (dialog[i].role != want)
      return fault(absl::StrCat(
          "message ", i + 1, " is from ", dialog[i].role, ", not ", want,
          ": after an optional system message the roles alternate user, "
          "assistant, ..., user"));
  }
  if (dialog.back().role != "user")
    return fault("the last message must be from the user");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>>
llama2ChatTokens(const TextTokenizer &tokenizer,
                 const std::vector<ChatMessage> &dialog,
                 const std::string &where, bool allowTags) {
  if (absl::Status s = checkConversation(dialog, where, allowTags); !s.ok())
    return s;
  std::vector<ChatMessage> d = dialog;
  if (d[0].role == "system") // folded into the first user message
    d = [&] {
      std::vector<ChatMessage> merged = {
          {d[1].role, kSys + d[0].content + kEndSys + d[1].content}};
      merged.insert(merged.end(), d.begin() + 2, d.end());
      return merged;
    }();
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < d.size(); i += 2) {
    std::vector<int32_t> turn =
        encode(tokenizer,
               absl::StrCat(kInst, " ", strip(d[i].content), " ", kEndInst, " ",
                            strip(d[i + 1].content), " "),
               true, true);
    ids.insert(ids.end(), turn.begin(), turn.end());
  }
  std::vector<int32_t> last =
      encode(tokenizer,
             absl::StrCat(kInst, " ", strip(d.back().content), " ", kEndInst),
             true, false);
  ids.insert(ids.end(), last.begin(), last.end());
  return ids;
}

std::vector<int32_t> llama2NextTurn(const TextTokenizer &tokenizer,
                                    const std::string &user, bool first,
                                    const std::string &system) {
  std::string content = user;
  if (first && !system.empty())
    content = kSys + system + kEndSys + user;
  std::vector<int32_t> ids;
  if (!first)
    ids.push_back(tokenizer.eos()); // the previous reply's end
  std::vector<int32_t> turn =
      encode(tokenizer, absl::StrCat(kInst, " ", strip(content), " ", kEndInst),
             true, false);
  ids.insert(ids.end(), turn.begin(), turn.end());
  return ids;
}

} // namespace kiln
