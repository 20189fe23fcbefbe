//===- OpenAiRequest.cpp --------------------------------------------------===//
#include "serve/OpenAiRequest.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <random>

namespace kiln::serve {
namespace {

using json = nlohmann::json;

ApiError invalid(const std::string &param, const std::string &message,
                 const std::string &code = "invalid_value") {
  return {400, code, param, message};
}

/// The JSON type a client sent, for "must be a number, not a string".
std::string typeName(const json &v) {
  if (v.is_number_integer() || v.is_number_unsigned())
    return "an integer";
  if (v.is_number())
    return "a number";
  if (v.is_string())
    return "a string";
  if (v.is_boolean())
    return "a boolean";
  if (v.is_array())
    return "an array";
  if (v.is_object())
    return "an object";
  return "null";
}

ApiError wrongType(const std::string &param, const std::string &want,
                   const json &got) {
  return invalid(
      param,
      absl::StrCat("'", param, "' must be ", want, ", not ", typeName(got)),
      "invalid_type");
}

/// body[name] as a number in [lo, hi] (a present null is absent).
std::optional<ApiError> number(const json &body, const std::string &name,
                               double lo, double hi, float &out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    return wrongType(name, "a number", *it);
  double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return invalid(name, absl::StrCat("'", name, "' must be in [", lo, ", ", hi,
                                      "], not ", v));
  out = float(v);
  return std::nullopt;
}

std::optional<ApiError> integer(const json &body, const std::string &name,
                                int64_t lo, int64_t hi,
                                std::optional<int64_t> &out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number_integer())
    return wrongType(name, "an integer", *it);
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return invalid(name, absl::StrCat("'", name, "' must be in [", lo, ", ", hi,
                                      "], not ", v));
  out = v;
  return std::nullopt;
}

std::optional<ApiError> boolean(const json &body, const std::string &name,
                                bool &out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_boolean())
    return wrongType(name, "a boolean", *it);
  out = it->get<bool>();
  return std::nullopt;
}

ApiError unsupported(const std::string &param, const std::string &what) {
  return invalid(param, absl::StrCat("'", param, "': ", what),
                 "unsupported_parameter");
}

/// Fields kiln does not do: refused, so that a client never takes a
/// silent default for an answer.
std::optional<ApiError> refuseUnsupported(const json &body, Endpoint e) {
  for (const char *name : {"n", "best_of"})
    if (auto it = body.find(name); it != body.end() && !it->is_null() &&
                                   !(it->is_number_integer() && *it == 1))
      return unsupported(name, "kiln generates one choice a request (1)");
  if (auto it = body.find("logprobs");
      it != body.end() && !it->is_null() && *it != false &&
      !(e == Endpoint::Completions && it->is_number_integer() && *it == 0))
    return unsupported("logprobs", "kiln does not return log probabilities");
  if (auto it = body.find("top_logprobs");
      it != body.end() && !it->is_null() && *it != 0)
    return unsupported("top_logprobs",
                       "kiln does not return log probabilities");
  if (auto it = body.find("echo"); it != body.end() && *it == true)
    return unsupported("echo", "kiln does not echo the prompt");
  if (auto it = body.find("suffix"); it != body.end() && !it->is_null())
    return unsupported("suffix", "Llama 2 does not fill in the middle");
  for (const char *name :
       {"tools", "functions", "tool_choice", "function_call"})
    if (auto it = body.find(name); it != body.end() && !it->is_null())
      return unsupported(name, "kiln does not call tools");
  if (auto it = body.find("response_format");
      it != body.end() && !it->is_null() &&
      !(it->is_object() && it->value("type", "") == "text"))
    return unsupported("response_format", "kiln writes text only");
  return std::nullopt;
}

std::optional<ApiError> readPrompt(const json &body, ApiRequest &out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    return invalid("prompt", "'prompt' is required", "missing_required");
  const json &p = *it;
  // A one-element list is the prompt itself (OpenAI's batch form).
  const json &one =
      p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())
          ? p[0]
          : p;
  if (one.is_string()) {
    out.promptText = one.get<std::string>();
    return std::nullopt;
  }
  if (!one.is_array() || one.empty())
    return wrongType("prompt", "a string or an array of token ids", one);
  for (const json &id : one) {
    if (id.is_string() || id.is_array())
      return unsupported("prompt",
                         "kiln serves one prompt a request, not a batch");
    if (!id.is_number_integer() || id < 0 || id > INT32_MAX)
      return invalid("prompt", "'prompt' token ids must be integers >= 0",
                     "invalid_type");
    out.promptIds.push_back(id.get<int32_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> readMessages(const json &body, ApiRequest &out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    return invalid("messages", "'messages' is required", "missing_required");
  if (!it->is_array() || it->empty())
    return wrongType("messages", "a non-empty array", *it);
  for (size_t i = 0; i < it->size(); ++i) {
    const json &m = (*it)[i];
    std::string where = absl::StrCat("messages[", i, "]");
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return invalid(
          where, absl::StrCat("'", where, "' must be an object with a role"));
    ChatMessage message{m["role"].get<std::string>(), ""};
    const json &content = m.value("content", json());
    if (content.is_string()) {
      message.content = content.get<std::string>();
    } else if (content.is_array()) { // [{"type": "text", "text": ...}]
      for (const json &part : content) {
        if (!part.is_object() || part.value("type", "") != "text" ||
            !part.contains("text") || !part["text"].is_string())
          return unsupported(where + ".content", "kiln reads text parts only");
        message.content += part["text"].get<std::string>();
      }
    } else {
      return wrongType(where + ".content", "a string", content);
    }
    out.messages.push_back(std::move(message));
  }
  return std::nullopt;
}

std::optional<ApiError> readStop(const json &body, ApiRequest &out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (it->is_string()) {
    out.stop.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json &s : *it) {
      if (!s.is_string())
        return wrongType("stop", "a string or an array of strings", s);
      out.stop.push_back(s.get<std::string>());
    }
  } else {
    return wrongType("stop", "a string or an array of strings", *it);
  }
  if (out.stop.size() > 4)
    return invalid("stop", "'stop' holds at most 4 strings");
  for (const std::string &s : out.stop)
    if (s.empty())
      return invalid("stop", "'stop' strings must not be empty");
  return std::nullopt;
}

std::optional<ApiError> readLogitBias(const json &body, ApiRequest &out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_object())
    return wrongType("logit_bias", "an object of token ids and biases", *it);
  for (const auto &[key, bias] : it->items()) {
    int64_t id;
    if (!absl::SimpleAtoi(key, &id) || id < 0)
      return invalid("logit_bias", absl::StrCat("'logit_bias': '", key,
                                                "' is not a token id"));
    if (!bias.is_number() || !(bias >= -100 && bias <= 100))
      return invalid("logit_bias",
                     absl::StrCat("'logit_bias': the bias of token ", key,
                                  " must be a number in [-100, 100]"));
    out.logitBias.push_back({id, bias.get<float>()});
  }
  return std::nullopt;
}

} // namespace

std::string errorBody(const ApiError &e) {
  const char *type = e.status == 401   ? "authentication_error"
                     : e.status == 404 ? "not_found_error"
                     : e.status == 429 ? "rate_limit_error"
                     : e.status >= 500 ? "server_error"
                                       : "invalid_request_error";
  json error = {{"message", e.message},
                {"type", type},
                {"param", e.param.empty() ? json() : json(e.param)},
                {"code", e.code.empty() ? json() : json(e.code)}};
  return json{{"error", error}}.dump(-1, ' ', false,
                                     json::error_handler_t::replace) +
         "\n";
}

std::optional<ApiError> parseApiRequest(const std::string &text,
                                        Endpoint endpoint, ApiRequest &out) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    return ApiError{400, "invalid_json", "",
                    "the request body is not valid JSON"};
  if (!body.is_object())
    return ApiError{400, "invalid_json", "",
                    "the request body must be a JSON object"};
  out = ApiRequest();
  out.endpoint = endpoint;
  out.sampling.temperature = 1; // OpenAI's default
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string())
      return wrongType("model", "a string", *it);
    out.model = it->get<std::string>();
  }
  if (auto e = refuseUnsupported(body, endpoint))
    return e;
  if (auto e = endpoint == Endpoint::Completions ? readPrompt(body, out)
                                                 : readMessages(body, out))
    return e;
  // Chat's newer name for max_tokens.
  const char *maxName = endpoint == Endpoint::ChatCompletions &&
                                body.contains("max_completion_tokens")
                            ? "max_completion_tokens"
                            : "max_tokens";
  if (auto e = integer(body, maxName, 0, INT32_MAX, out.maxTokens))
    return e;
  std::optional<int64_t> seed, topK;
  if (auto e = integer(body, "seed", INT64_MIN, INT64_MAX, seed))
    return e;
  if (seed) // any integer, as OpenAI takes; the device draws with 32 bits
    out.seed = uint32_t(uint64_t(*seed));
  if (auto e = integer(body, "top_k", -1, INT32_MAX, topK))
    return e;
  out.sampling.topK = topK && *topK > 0 ? int32_t(*topK) : 0; // -1: off
  SamplingParams &s = out.sampling;
  if (auto e = number(body, "temperature", 0, 2, s.temperature))
    return e;
  if (auto e = number(body, "top_p", 0, 1, s.topP))
    return e;
  if (auto e = number(body, "min_p", 0, 1, s.minP))
    return e;
  if (auto e = number(body, "presence_penalty", -2, 2, s.presencePenalty))
    return e;
  if (auto e = number(body, "frequency_penalty", -2, 2, s.frequencyPenalty))
    return e;
  if (auto e =
          number(body, "repetition_penalty", 1e-3, 100, s.repetitionPenalty))
    return e;
  if (auto e = readStop(body, out))
    return e;
  if (auto e = readLogitBias(body, out))
    return e;
  if (auto e = boolean(body, "stream", out.stream))
    return e;
  if (auto e = boolean(body, "ignore_eos", out.ignoreEos))
    return e;
  if (auto e = boolean(body, "return_token_ids", out.returnTokenIds))
    return e;
  if (auto it = body.find("stream_options");
      it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return wrongType("stream_options", "an object", *it);
    if (auto e = boolean(*it, "include_usage", out.includeUsage))
      return e;
  }
  return std::nullopt;
}

std::optional<ApiError> prepareRequest(const ApiRequest &api,
                                       const ModelInfo &model,
                                       int64_t maxTokensCap,
                                       PreparedRequest &out) {
  out = PreparedRequest();
  Request &r = out.request;
  const TextTokenizer *tok = model.tokenizer;
  if ((api.promptText || !api.messages.empty() || !api.stop.empty()) && !tok)
    return invalid(api.messages.empty() ? (api.promptText ? "prompt" : "stop")
                                        : "messages",
                   absl::StrCat("model '", model.name,
                                "' has no tokenizer.model: send the prompt "
                                "as token ids, without stop strings"),
                   "no_tokenizer");
  if (api.endpoint == Endpoint::ChatCompletions) {
    auto ids = llama2ChatTokens(*tok, api.messages, "messages");
    if (!ids.ok())
      return invalid("messages", std::string(ids.status().message()));
    r.prompt = std::move(*ids);
  } else if (api.promptText) {
    r.prompt = {tok->bos()};
    std::vector<int32_t> text = tok->encodeText(*api.promptText);
    r.prompt.insert(r.prompt.end(), text.begin(), text.end());
  } else {
    r.prompt = api.promptIds;
    for (int32_t id : r.prompt)
      if (id >= model.vocab)
        return invalid("prompt", absl::StrCat("'prompt': token ", id,
                                              " is not in the vocabulary of ",
                                              model.vocab));
  }
  if (r.prompt.empty())
    return invalid("prompt", "'prompt' is empty");
  int64_t prompt = int64_t(r.prompt.size());
  out.promptTokens = prompt;
  const char *maxName = api.endpoint == Endpoint::Completions
                            ? "max_tokens"
                            : "max_completion_tokens";
  int64_t room = model.context - prompt;
  int64_t maxTokens = api.maxTokens.value_or(std::max<int64_t>(room, 0));
  if (maxTokensCap > 0)
    maxTokens = std::min(maxTokens, maxTokensCap);
  if (prompt + maxTokens > model.context || room < 1)
    return invalid(api.maxTokens ? maxName : "prompt",
                   absl::StrCat("this model's maximum context length is ",
                                model.context, " tokens; the request has ",
                                prompt, " prompt tokens and asks for ",
                                maxTokens, " more"),
                   "context_length_exceeded");
  r.maxNewTokens = maxTokens;
  r.sampling = api.sampling;
  r.sampling.seed = api.seed ? *api.seed : std::random_device()();
  for (const auto &[id, bias] : api.logitBias) {
    if (id >= model.vocab)
      return invalid("logit_bias", absl::StrCat("'logit_bias': token ", id,
                                                " is not in the vocabulary of ",
                                                model.vocab));
    r.logitBias.push_back({int32_t(id), bias});
  }
  if (!api.ignoreEos)
    r.hooks.stopTokens.push_back(tok ? tok->eos() : model.eos);
  out.stops = api.stop;
  return std::nullopt;
}

} // namespace kiln::serve
