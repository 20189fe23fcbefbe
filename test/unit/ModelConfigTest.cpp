#include "runtime/ModelConfig.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
const char *kTiny = R"({
  "model_type": "llama", "hidden_size": 64, "intermediate_size": 192,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "vocab_size": 320, "max_position_embeddings": 128, "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false
})";

/// kTiny with one field's value text replaced ("" removes the field).
std::string with(const std::string &field, const std::string &value) {
  std::string s = kTiny;
  std::string key = "\"" + field + "\": ";
  size_t at = s.find(key);
  if (at == std::string::npos) // add it
    return s.substr(0, s.size() - 1) + ", " + key + value + "}";
  size_t end = s.find_first_of(",}", at + key.size());
  if (value.empty()) {
    size_t stop = s[end] == ',' ? end + 1 : end;
    return s.substr(0, at) + s.substr(stop);
  }
  return s.substr(0, at + key.size()) + value + s.substr(end);
}

std::string error(const std::string &json) {
  auto c = parseLlamaConfig(json, "m/config.json");
  return c.ok() ? "ok" : std::string(c.status().message());
}
} // namespace

TEST(ModelConfig, ParsesTheTinyFixture) {
  auto c = parseLlamaConfig(kTiny, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hiddenSize, 64);
  EXPECT_EQ(c->numKVHeads, 2);
  EXPECT_EQ(c->headDim(), 16);
  EXPECT_DOUBLE_EQ(c->rmsNormEps, 1e-5);
}

TEST(ModelConfig, Defaults) {
  auto c = parseLlamaConfig(with("num_key_value_heads", ""), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->numKVHeads, 4); // MHA when absent, as in Llama 2 7B
  c = parseLlamaConfig(with("rope_theta", ""), "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->ropeTheta, 10000.0);
}

TEST(ModelConfig, NamesTheFileAndTheFault) {
  EXPECT_EQ(error("{"), error("{")); // deterministic
  EXPECT_EQ(error("{").rfind("m/config.json: not valid JSON", 0), 0u);
  EXPECT_EQ(error("[1]"), "m/config.json: not a JSON object");
  EXPECT_EQ(error(with("hidden_size", "")),
            "m/config.json: missing field 'hidden_size'");
  EXPECT_EQ(error(with("vocab_size", "\"big\"")),
            "m/config.json: field 'vocab_size' must be a positive integer, "
            "not \"big\"");
  EXPECT_EQ(error(with("num_hidden_layers", "0")),
            "m/config.json: field 'num_hidden_layers' must be a positive "
            "integer, not 0");
  EXPECT_EQ(error(with("rms_norm_eps", "-1")),
            "m/config.json: field 'rms_norm_eps' must be a positive number, "
            "not -1");
}

TEST(ModelConfig, RejectsContradictions) {
  EXPECT_EQ(error(with("num_attention_heads", "5")),
            "m/config.json: num_attention_heads (5) does not divide "
            "hidden_size (64)");
  EXPECT_EQ(error(with("num_key_value_heads", "3")),
            "m/config.json: num_key_value_heads (3) does not divide "
            "num_attention_heads (4)");
  EXPECT_EQ(error(with("head_dim", "32")),
            "m/config.json: head_dim (32) differs from hidden_size / "
            "num_attention_heads (16)");
  EXPECT_EQ(error(with("hidden_size", "60")),
            "m/config.json: head dimension 15 is odd; RoPE rotates pairs of "
            "dimensions");
  EXPECT_EQ(error(with("model_type", "\"mistral\"")),
            "m/config.json: model_type is 'mistral', kiln compiles 'llama'");
  EXPECT_EQ(error(with("hidden_act", "\"gelu\"")),
            "m/config.json: hidden_act is 'gelu', Llama 2 uses 'silu' "
            "(SwiGLU)");
}

// rope_scaling as transformers spells it: rope_type or the older type.
TEST(ModelConfig, RopeScaling) {
  for (const char *key : {"rope_type", "type"})
    for (const char *type : {"linear", "dynamic"}) {
      auto c = parseLlamaConfig(
          with("rope_scaling", std::string("{\"") + key + "\": \"" + type +
                                   "\", \"factor\": 4.0}"),
          "config.json");
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(c->ropeScaling, type);
      EXPECT_EQ(c->ropeScalingFactor, 4.0);
    }
  auto none = parseLlamaConfig(
      with("rope_scaling", "{\"rope_type\": \"default\"}"), "config.json");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->ropeScaling, "");
  EXPECT_EQ(parseLlamaConfig(with("rope_scaling", "null"), "c")->ropeScaling,
            "");
  EXPECT_EQ(error(with("rope_scaling",
                       "{\"rope_type\": \"linear\", \"factor\": 0.5}")),
            "m/config.json: rope_scaling.factor is 0.5; a scaling factor is at "
            "least 1");
  EXPECT_EQ(error(with("rope_scaling", "{\"type\": \"linear\"}")),
            "m/config.json: missing field 'factor'");
  EXPECT_EQ(
      error(with("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}")),
      "m/config.json: rope_scaling type 'yarn' is not supported; kiln "
      "applies linear and dynamic");
  EXPECT_EQ(error(with("rope_scaling", "{\"factor\": 4.0}")),
            "m/config.json: rope_scaling has neither rope_type nor type");
  EXPECT_EQ(error(with("rope_scaling", "4")),
            "m/config.json: rope_scaling must be an object, not 4");
}

TEST(ModelConfig, MissingFile) {
  auto c = loadLlamaConfig("/nonexistent/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "/nonexistent/config.json: No such file or directory");
}
