//===- OpenAiRequestFuzzer.cpp - a server's request bodies, any bytes -----===//
//
// What a client sends the server: parseApiRequest refuses what is not a
// request with an error object; what it and prepareRequest accept fits
// the model (ids in the vocabulary, prompt and reply in the context).
//
//===----------------------------------------------------------------------===//
#include "serve/OpenAiRequest.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln::serve;
  std::string body(reinterpret_cast<const char *>(data), size);
  for (Endpoint e : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    ApiRequest api;
    if (auto error = parseApiRequest(body, e, api)) {
      if (error->status != 400 || error->message.empty())
        std::abort();
      (void)errorBody(*error); // any bytes of the body, as JSON
      continue;
    }
    ModelInfo model{"m", 320, 128, nullptr, 2};
    PreparedRequest p;
    if (prepareRequest(api, model, /*maxTokensCap=*/64, p))
      continue;
    const kiln::Request &r = p.request;
    if (r.prompt.empty() ||
        int64_t(r.prompt.size()) + r.maxNewTokens > model.context ||
        r.maxNewTokens > 64)
      std::abort();
    for (int32_t id : r.prompt)
      if (id < 0 || id >= model.vocab)
        std::abort();
    for (const auto &[id, bias] : r.logitBias)
      if (id < 0 || id >= model.vocab || !(bias >= -100 && bias <= 100))
        std::abort();
  }
  return 0;
}
