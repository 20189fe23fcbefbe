// A PEFT LoRA adapter folder (runtime/LoraAdapter.h): peft's own files read
// as they are (test/fixtures/lora, made by peft), the --lora spelling's
// weight, and each config or tensor kiln refuses, with its one-line error.
#include "runtime/LoraAdapter.h"

#include "test/unit/TestFiles.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

using namespace kiln;
using kiln::test::TempDir;
using kiln::test::writeFile;

namespace {

std::string fixtures() {
  const char *dir = std::getenv("KILN_FIXTURES");
  return std::string(dir ? dir : "test/fixtures") + "/lora/";
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// tiny-mha-qv-r8's adapter copied into `dir`, its config edited by `edit`
/// and its tensors file replaced by `tensors` when not empty.
void adapterFolder(const TempDir &dir,
                   const std::function<void(nlohmann::json &)> &edit,
                   const std::string &tensors = "") {
  const std::string from = fixtures() + "tiny-mha-qv-r8/";
  nlohmann::json config =
      nlohmann::json::parse(readText(from + "adapter_config.json"));
  edit(config);
  writeFile(dir.file("adapter_config.json"), config.dump());
  writeFile(dir.file("adapter_model.safetensors"),
            tensors.empty() ? readText(from + "adapter_model.safetensors")
                            : tensors);
}

std::string error(const std::string &spec) {
  auto a = LoraAdapter::open(spec);
  EXPECT_FALSE(a.ok()) << spec;
  return a.ok() ? "" : std::string(a.status().message());
}

} // namespace

TEST(LoraAdapter, ReadsPeftsFolder) {
  auto a = LoraAdapter::open(fixtures() + "tiny-mha-qv-r8");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->rank, 8);
  EXPECT_EQ(a->alpha, 32);
  EXPECT_FALSE(a->rslora);
  EXPECT_EQ(a->weight, 1.0);
  EXPECT_EQ(a->scaling(), 4.0);
  ASSERT_EQ(a->modules.size(), 4u); // q and v of 2 layers
  const auto &q = a->modules.at("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.a->shape, (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(q.b->shape, (std::vector<int64_t>{128, 8}));
  EXPECT_FALSE(a->modules.count("model.layers.0.self_attn.k_proj.weight"));

  auto rs = LoraAdapter::open(fixtures() + "tiny-gqa-all-r4-rslora:0.25");
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_TRUE(rs->rslora);
  EXPECT_EQ(rs->scaling(), 8 / std::sqrt(4.0)); // alpha / sqrt(r)
  EXPECT_EQ(rs->weight, 0.25);
  EXPECT_EQ(rs->folder, fixtures() + "tiny-gqa-all-r4-rslora");
  EXPECT_EQ(rs->modules.size(), 14u);
}

TEST(LoraAdapter, RefusesWhatItCannotMerge) {
  struct Case {
    std::function<void(nlohmann::json &)> edit;
    std::string message;
  };
  const Case cases[] = {
      {[](nlohmann::json &c) { c["peft_type"] = "IA3"; },
       "peft_type is 'IA3'; kiln merges LoRA adapters (LORA) only"},
      {[](nlohmann::json &c) { c["use_dora"] = true; },
       "use_dora is true: DoRA adapters are not merged (LoRA only)"},
      {[](nlohmann::json &c) { c["bias"] = "all"; },
       "bias is 'all': kiln merges adapters without biases"},
      {[](nlohmann::json &c) {
         c["rank_pattern"] = {{"q_proj", 4}};
       },
       "rank_pattern is set: kiln merges adapters of one rank and alpha on "
       "whole projections only"},
      {[](nlohmann::json &c) { c["modules_to_save"] = {"lm_head"}; },
       "modules_to_save is set"},
      {[](nlohmann::json &c) {
         c["alora_invocation_tokens"] = {5, 6};
       },
       "alora_invocation_tokens is set"},
      {[](nlohmann::json &c) { c["lora_bias"] = true; },
       "lora_bias is true: kiln merges plain LoRA"},
      {[](nlohmann::json &c) { c["r"] = 0; },
       "field 'r' must be a positive integer, not 0"},
      {[](nlohmann::json &c) { c["r"] = 4; }, // the tensors' rank is 8
       "has shape [8, 128] (F32); a LoRA A is [r, in] of floats with r = 4"},
      {[](nlohmann::json &c) { c.erase("lora_alpha"); },
       "missing field 'lora_alpha'"},
      {[](nlohmann::json &c) {
         c["target_modules"] = {"q_proj", "wte"};
       },
       "target module 'wte' is not a projection of Llama 2 (q_proj, k_proj, "
       "v_proj, o_proj, gate_proj, up_proj, down_proj)"},
      {[](nlohmann::json &c) { c["target_modules"] = {"mlp.q_proj"}; },
       "target module 'mlp.q_proj' is not a projection of Llama 2"},
      {[](nlohmann::json &c) { c["target_modules"] = 7; },
       "field 'target_modules' must be a list or a string, not 7"},
  };
  for (const Case &c : cases) {
    TempDir dir;
    adapterFolder(dir, c.edit);
    std::string e = error(dir.file(""));
    EXPECT_NE(e.find(c.message), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // Target modules as peft spells them otherwise: full names, a regular
  // expression, all-linear.
  for (nlohmann::json targets :
       {nlohmann::json{"self_attn.q_proj", "model.layers.0.self_attn.v_proj"},
        nlohmann::json(".*\\.(q|v)_proj"), nlohmann::json("all-linear")}) {
    TempDir dir;
    adapterFolder(dir,
                  [&](nlohmann::json &c) { c["target_modules"] = targets; });
    EXPECT_TRUE(LoraAdapter::open(dir.file("")).ok()) << targets.dump();
  }
}

TEST(LoraAdapter, RefusesTensorsThatAreNotAProjectionsAOrB) {
  auto one = [](const std::string &name, const std::string &shape) {
    // One F32 tensor of 8 x 128 (or 128 x 8) zeros.
    std::string header = "{\"" + name +
                         "\":{\"dtype\":\"F32\",\"shape\":" + shape +
                         ",\"data_offsets\":[0,4096]}}";
    return kiln::test::safetensorsBytes(header, std::string(4096, '\0'));
  };
  const std::pair<std::string, std::string> cases[] = {
      {one("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
           "[8,128]"),
       "module 'model.layers.0.self_attn.q_proj' has a lora_A but no lora_B"},
      {one("base_model.model.lm_head.lora_A.weight", "[8,128]"),
       "tensor 'base_model.model.lm_head.lora_A.weight' is not the lora_A or "
       "lora_B of a Llama 2 projection"},
      {one("base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_"
           "vector.weight",
           "[8,128]"),
       "is not the lora_A or lora_B of a Llama 2 projection"},
      {one("model.layers.0.self_attn.q_proj.lora_B.weight", "[128,8]"),
       "is not the lora_A or lora_B of a Llama 2 projection"},
      {one("base_model.model.model.layers.0.mlp.q_proj.lora_B.weight",
           "[128,8]"),
       "is not the lora_A or lora_B of a Llama 2 projection"},
  };
  for (const auto &[bytes, message] : cases) {
    TempDir dir;
    adapterFolder(
        dir, [](nlohmann::json &) {}, bytes);
    std::string e = error(dir.file(""));
    EXPECT_NE(e.find(message), std::string::npos) << e;
  }
}

TEST(LoraAdapter, ReadsTheWeightOfTheSpelling) {
  TempDir dir;
  adapterFolder(dir, [](nlohmann::json &) {});
  std::string folder = dir.file("");
  folder.pop_back(); // no trailing slash
  auto a = LoraAdapter::open(folder + ":-0.5");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->weight, -0.5);
  EXPECT_EQ(a->folder, folder);
  EXPECT_NE(error(folder + ":inf").find("not a finite number"),
            std::string::npos);
  // Not a number: the whole is the folder's name.
  EXPECT_NE(error(folder + ":x").find(":x/adapter_config.json: cannot be read"),
            std::string::npos);
}
