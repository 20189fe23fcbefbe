//===- ModelConfig.cpp - parse and check a LlamaConfig --------------------===//
#include "runtime/ModelConfig.h"
#include "runtime/JsonRead.h"

#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {
using Json = nlohmann::json;

struct Reader {
  const Json &json;
  const std::string &path;
  absl::Status status = absl::OkStatus();

  void fail(const std::string &what) {
    if (status.ok())
      status = absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  }

  /// A positive integer field; `fallback` < 0 means the field is required.
  int64_t positive(const char *key, int64_t fallback = -1) {
    auto it = json.find(key);
    if (it == json.end() || it->is_null()) {
      if (fallback < 0)
        fail(absl::StrCat("missing field '", key, "'"));
      return fallback;
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 ||
        it->get<int64_t>() > (int64_t(1) << 40)) {
      fail(absl::StrCat("field '", key, "' must be a positive integer, not ",
                        it->dump()));
      return 1;
    }
    return it->get<int64_t>();
  }

  double positiveReal(const char *key, double fallback = -1) {
    auto it = json.find(key);
    if (it == json.end() || it->is_null()) {
      if (fallback < 0)
        fail(absl::StrCat("missing field '", key, "'"));
      return fallback;
    }
    if (!it->is_number() || !(it->get<double>() > 0)) {
      fail(absl::StrCat("field '", key, "' must be a positive number, not ",
                        it->dump()));
      return 1;
    }
    return it->get<double>();
  }

  std::string string(const char *key) {
    auto it = json.find(key);
    if (it == json.end() || it->is_null())
      return "";
    if (!it->is_string()) {
      fail(
          absl::StrCat("field '", key, "' must be a string, not ", it->dump()));
      return "";
    }
    return it->get<std::string>();
  }

  bool boolean(const char *key, bool fallback) {
    auto it = json.find(key);
    if (it == json.end() || it->is_null())
      return fallback;
    if (!it->is_boolean()) {
      fail(absl::StrCat("field '", key, "' must be true or false, not ",
                        it->dump()));
      return fallback;
    }
    return it->get<bool>();
  }
};
} // namespace

absl::StatusOr<LlamaConfig> parseLlamaConfig(std::string_view text,
                                             const std::string &path) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const std::exception &e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON: ", jsonErrorMessage(e)));
  }
  if (!json.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object"));

  Reader r{json, path};
  LlamaConfig c;
  if (std::string type = r.string("model_type");
      !type.empty() && type != "llama")
    r.fail(absl::StrCat("model_type is '", type, "', kiln compiles 'llama'"));
  if (std::string act = r.string("hidden_act"); !act.empty() && act != "silu")
    r.fail(absl::StrCat("hidden_act is '", act,
                        "', Llama 2 uses 'silu' (SwiGLU)"));
  if (auto it = json.find("rope_scaling"); it != json.end() && !it->is_null())
    r.fail("rope_scaling is set; kiln supports Llama 2's unscaled RoPE only");
  c.hiddenSize = r.positive("hidden_size");
  c.intermediateSize = r.positive("intermediate_size");
  c.numLayers = r.positive("num_hidden_layers");
  c.numHeads = r.positive("num_attention_heads");
  c.numKVHeads = r.positive("num_key_value_heads", c.numHeads);
  c.vocabSize = r.positive("vocab_size");
  c.maxPositions = r.positive("max_position_embeddings");
  c.rmsNormEps = r.positiveReal("rms_norm_eps");
  c.ropeTheta = r.positiveReal("rope_theta", 10000.0);
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", false);
  c.torchDtype = r.string("torch_dtype");
  int64_t headDim = r.positive("head_dim", 0);
  if (!r.status.ok())
    return r.status;

  // Contradictions between fields.
  if (c.hiddenSize % c.numHeads != 0)
    r.fail(absl::StrCat("num_attention_heads (", c.numHeads,
                        ") does not divide hidden_size (", c.hiddenSize, ")"));
  else if (c.numHeads % c.numKVHeads != 0)
    r.fail(absl::StrCat("num_key_value_heads (", c.numKVHeads,
                        ") does not divide num_attention_heads (", c.numHeads,
                        ")"));
  else if (headDim != 0 && headDim != c.headDim())
    r.fail(absl::StrCat("head_dim (", headDim,
                        ") differs from hidden_size / num_attention_heads (",
                        c.headDim(), ")"));
  else if (c.headDim() % 2 != 0)
    r.fail(absl::StrCat("head dimension ", c.headDim(),
                        " is odd; RoPE rotates pairs of dimensions"));
  if (!r.status.ok())
    return r.status;
  return c;
}

absl::StatusOr<LlamaConfig> loadLlamaConfig(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return parseLlamaConfig(text.str(), path);
}

} // namespace kiln
