//===- OpenAiRequest.h - OpenAI's request bodies, checked -------*- C++ -*-===//
//
// POST /v1/completions and /v1/chat/completions as OpenAI defines them
// (and vLLM extends them: top_k, min_p, repetition_penalty, ignore_eos),
// read into a scheduler Request for one served model. Every fault is a 400
// naming the field; fields kiln does not do (n > 1, best_of, logprobs,
// echo, suffix, tools) are refused rather than ignored. docs/serve.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_OPENAIREQUEST_H
#define KILN_SERVE_OPENAIREQUEST_H

#include "runtime/ChatTemplate.h"
#include "runtime/Scheduler.h"
#include "runtime/TextTokenizer.h"
#include "serve/ApiError.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::serve {

enum class Endpoint { Completions, ChatCompletions };

/// A request body as the client wrote it, its types checked.
struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model; // empty: the server's own
  // Completions: a text prompt, or token ids.
  std::optional<std::string> promptText;
  std::vector<int32_t> promptIds;
  // Chat completions.
  std::vector<ChatMessage> messages;
  std::optional<int64_t> maxTokens;
  std::optional<uint32_t> seed;
  SamplingParams sampling; // without the seed; OpenAI's temperature 1
  std::vector<std::pair<int64_t, float>> logitBias; // ids not yet checked
  std::vector<std::string> stop;
  bool stream = false;
  bool includeUsage = false;   // stream_options.include_usage
  bool ignoreEos = false;      // vLLM's: generate past end-of-sequence
  bool returnTokenIds = false; // vLLM's: the prompt's ids in the response
};

/// Reads `body` (JSON) for `endpoint`, or says why it is refused.
std::optional<ApiError> parseApiRequest(const std::string &body,
                                        Endpoint endpoint, ApiRequest &out);

/// What a served model offers a request.
struct ModelInfo {
  std::string name;
  int64_t vocab = 0;
  int64_t context = 0; // tokens a sequence may hold, prompt and reply
  const TextTokenizer *tokenizer = nullptr; // null: token ids only
  int32_t eos = 2;                          // Llama 2's </s>
};

/// A request ready for the scheduler (hooks unset) and how to answer it.
struct PreparedRequest {
  Request request;
  std::vector<std::string> stops;
  int64_t promptTokens = 0;
};

/// The prompt's ids (the chat template's for chat), max_tokens (absent:
/// the rest of the context, capped; above `maxTokensCap` when it is not 0:
/// the cap), the logit bias against the vocabulary, the seed (absent: a
/// fresh one), end-of-sequence as a stop token unless ignore_eos.
std::optional<ApiError> prepareRequest(const ApiRequest &api,
                                       const ModelInfo &model,
                                       int64_t maxTokensCap,
                                       PreparedRequest &out);

} // namespace kiln::serve

#endif // KILN_SERVE_OPENAIREQUEST_H
