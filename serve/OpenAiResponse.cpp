//===- OpenAiResponse.cpp -------------------------------------------------===//
#include "serve/OpenAiResponse.h"

#include <nlohmann/json.hpp>

namespace kiln::serve {
namespace {

using json = nlohmann::json;

json usageJson(const Usage &u) {
  return {{"prompt_tokens", u.prompt},
          {"completion_tokens", u.completion},
          {"total_tokens", u.prompt + u.completion}};
}

json start(const ResponseHead &h, const char *object) {
  json body = {{"id", h.id},
               {"object", object},
               {"created", h.created},
               {"model", h.model}};
  if (!h.promptIds.empty())
    body["prompt_token_ids"] = h.promptIds;
  return body;
}

std::string event(const json &body) {
  // Invalid UTF-8 (a token's lone bytes) becomes U+FFFD, not an exception.
  return "data: " + body.dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n\n";
}

} // namespace

std::string completionBody(const ResponseHead &h, const std::string &text,
                           const std::vector<int32_t> &tokens,
                           const std::string &finishReason,
                           const Usage &usage) {
  json choice = {{"index", 0}, {"finish_reason", finishReason}};
  if (h.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice.update({{"text", text}, {"logprobs", nullptr}});
  choice["token_ids"] = tokens;
  json body = start(h, h.chat ? "chat.completion" : "text_completion");
  body["choices"] = json::array({choice});
  body["usage"] = usageJson(usage);
  return body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string chunkEvent(const ResponseHead &h, const std::string &text,
                       const std::vector<int32_t> &tokens, bool first,
                       const std::optional<std::string> &finishReason,
                       const std::optional<Usage> &usage) {
  json choice = {
      {"index", 0},
      {"finish_reason", finishReason ? json(*finishReason) : json(nullptr)}};
  if (h.chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || !finishReason)
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice.update({{"text", text}, {"logprobs", nullptr}});
  }
  choice["token_ids"] = tokens;
  json body = start(h, h.chat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array({choice});
  body["usage"] = usage ? usageJson(*usage) : json(nullptr);
  return event(body);
}

std::string usageEvent(const ResponseHead &h, const Usage &usage) {
  json body = start(h, h.chat ? "chat.completion.chunk" : "text_completion");
  body.erase("prompt_token_ids");
  body["choices"] = json::array();
  body["usage"] = usageJson(usage);
  return event(body);
}

std::string modelsBody(const std::vector<std::string> &names, int64_t created) {
  json data = json::array();
  for (const std::string &name : names)
    data.push_back({{"id", name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "kiln"}});
  return json{{"object", "list"}, {"data", data}}.dump() + "\n";
}

} // namespace kiln::serve
