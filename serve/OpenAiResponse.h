//===- OpenAiResponse.h - OpenAI's response bodies --------------*- C++ -*-===//
//
// The JSON kiln answers with: a completion, a chat completion, their
// streamed chunks as server-sent events, and the model list. Every choice
// also carries `token_ids` (the tokens it holds; vLLM's extension), so a
// client of a model without a tokenizer, and a test, sees the tokens.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_OPENAIRESPONSE_H
#define KILN_SERVE_OPENAIRESPONSE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::serve {

/// What every body and chunk of one response repeats.
struct ResponseHead {
  std::string id; // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  bool chat = false;
  /// The prompt's ids (return_token_ids), or empty.
  std::vector<int32_t> promptIds;
};

struct Usage {
  int64_t prompt = 0, completion = 0;
};

/// A whole (non-streamed) response.
std::string completionBody(const ResponseHead &head, const std::string &text,
                           const std::vector<int32_t> &tokens,
                           const std::string &finishReason, const Usage &usage);

/// One streamed chunk as a server-sent event ("data: {...}\n\n"): new
/// text and tokens; the last one has its finish reason and the usage. A
/// chat's first chunk has the assistant's role.
std::string chunkEvent(const ResponseHead &head, const std::string &text,
                       const std::vector<int32_t> &tokens, bool first,
                       const std::optional<std::string> &finishReason,
                       const std::optional<Usage> &usage);

/// stream_options.include_usage's chunk: no choices, the usage.
std::string usageEvent(const ResponseHead &head, const Usage &usage);

/// The event that ends every stream.
inline const char *kDoneEvent = "data: [DONE]\n\n";

/// GET /v1/models.
std::string modelsBody(const std::vector<std::string> &names, int64_t created);

} // namespace kiln::serve

#endif // KILN_SERVE_OPENAIRESPONSE_H
