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

  JsonFields r{json, path};
  LlamaConfig c;
  if (std::string type = r.string("model_type");
      !type.empty() && type != "llama")
    r.fail(absl::StrCat("model_type is '", type, "', kiln compiles 'llama'"));
  if (std::string act = r.string("hidden_act"); !act.empty() && act != "silu")
    r.fail(absl::StrCat("hidden_act is '", act,
                        "', Llama 2 uses 'silu' (SwiGLU)"));
  if (auto it = json.find("rope_scaling"); it != json.end() && !it->is_null()) {
    // transformers' spellings: rope_type, or the older type; "default" is
    // none.
    if (!it->is_object()) {
      r.fail(absl::StrCat("rope_scaling must be an object, not ", it->dump()));
    } else {
      JsonFields scaling{*it, path};
      std::string type = scaling.string("rope_type");
      if (type.empty())
        type = scaling.string("type");
      if (type == "linear" || type == "dynamic") {
        c.ropeScaling = type;
        c.ropeScalingFactor = scaling.positiveReal("factor");
        if (scaling.status.ok() && !(c.ropeScalingFactor >= 1))
          scaling.fail(absl::StrCat("rope_scaling.factor is ",
                                    c.ropeScalingFactor,
                                    "; a scaling factor is at least 1"));
      } else if (!type.empty() && type != "default") {
        scaling.fail(absl::StrCat("rope_scaling type '", type,
                                  "' is not supported; kiln applies linear "
                                  "and dynamic"));
      } else if (type.empty()) {
        scaling.fail("rope_scaling has neither rope_type nor type");
      }
      if (!scaling.status.ok() && r.status.ok())
        r.status = scaling.status;
    }
  }
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
