//===- LoraAdapter.cpp ----------------------------------------------------===//
#include "runtime/LoraAdapter.h"
#include "runtime/JsonRead.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {
using Json = nlohmann::json;

absl::Status fault(const std::string &where, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

/// Llama 2's projections: the module part each lives in, and its name.
constexpr std::pair<const char *, const char *> kProjections[] = {
    {"self_attn", "q_proj"}, {"self_attn", "k_proj"}, {"self_attn", "v_proj"},
    {"self_attn", "o_proj"}, {"mlp", "gate_proj"},    {"mlp", "up_proj"},
    {"mlp", "down_proj"}};
constexpr const char *kProjectionList =
    "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";

/// True when `module` is a Llama 2 projection's full name,
/// model.layers.N.(self_attn|mlp).X.
bool isProjectionModule(std::string_view module) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    size_t dot = module.find('.', at);
    parts.push_back(module.substr(at, dot - at));
    if (dot == std::string_view::npos)
      break;
    at = dot + 1;
  }
  if (parts.size() != 5 || parts[0] != "model" || parts[1] != "layers" ||
      parts[2].empty() ||
      parts[2].find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  for (auto [part, name] : kProjections)
    if (parts[3] == part && parts[4] == name)
      return true;
  return false;
}

/// True when peft's rule for a target_modules entry (the module's name,
/// or its end after a dot) can name a Llama 2 projection.
bool namesAProjection(const std::string &target) {
  for (auto [part, name] : kProjections)
    for (const std::string &suffix :
         {std::string(name), absl::StrCat(part, ".", name)})
      if (target == suffix)
        return true;
  return isProjectionModule(target);
}

/// adapter_config.json, checked: LoRA as kiln merges it, nothing else.
absl::Status readConfig(const std::string &path, LoraAdapter &a) {
  std::ifstream in(path);
  if (!in)
    return fault(path, "cannot be read (a PEFT adapter folder holds "
                       "adapter_config.json)");
  std::stringstream text;
  text << in.rdbuf();
  Json json;
  try {
    json = Json::parse(text.str());
  } catch (const std::exception &e) {
    return fault(path, absl::StrCat("not valid JSON: ", jsonErrorMessage(e)));
  }
  if (!json.is_object())
    return fault(path, "not a JSON object");
  JsonFields r{json, path};
  if (std::string type = r.string("peft_type"); type != "LORA")
    r.fail(absl::StrCat("peft_type is '", type,
                        "'; kiln merges LoRA adapters (LORA) only"));
  if (r.boolean("use_dora", false))
    r.fail("use_dora is true: DoRA adapters are not merged (LoRA only)");
  a.rank = r.positive("r");
  a.alpha = r.positiveReal("lora_alpha");
  a.rslora = r.boolean("use_rslora", false);
  // peft turns fan_in_fan_out off for torch.nn.Linear, which every Llama 2
  // projection is: the A and B it saves are as without it.
  (void)r.boolean("fan_in_fan_out", false);
  if (std::string bias = r.string("bias"); !bias.empty() && bias != "none")
    r.fail(absl::StrCat("bias is '", bias,
                        "': kiln merges adapters without biases"));
  auto nonEmpty = [&](const char *key) {
    auto it = json.find(key);
    return it != json.end() && !it->is_null() && !it->empty();
  };
  for (const char *key :
       {"modules_to_save", "layers_to_transform", "layers_pattern",
        "rank_pattern", "alpha_pattern", "layer_replication",
        "trainable_token_indices", "target_parameters"})
    if (nonEmpty(key))
      r.fail(absl::StrCat(key, " is set: kiln merges adapters of one rank "
                               "and alpha on whole projections only"));
  // Variants whose output is not W + scaling * B A for every token.
  if (nonEmpty("alora_invocation_tokens"))
    r.fail("alora_invocation_tokens is set: an activated LoRA applies from "
           "its invocation tokens on and cannot be merged");
  for (const char *key : {"lora_bias", "use_qalora"})
    if (r.boolean(key, false))
      r.fail(absl::StrCat(key, " is true: kiln merges plain LoRA (W + "
                               "scaling * B A) only"));
  if (!r.status.ok())
    return r.status;
  auto targets = json.find("target_modules");
  if (targets == json.end() || targets->is_null())
    return fault(path, "missing field 'target_modules'");
  if (targets->is_string()) // a regular expression, or peft's all-linear
    return absl::OkStatus();
  if (!targets->is_array())
    return fault(path, absl::StrCat("field 'target_modules' must be a list "
                                    "or a string, not ",
                                    targets->dump()));
  for (const Json &t : *targets) {
    if (!t.is_string())
      return fault(path, absl::StrCat("target_modules holds ", t.dump(),
                                      ", not a module name"));
    if (!namesAProjection(t.get<std::string>()))
      return fault(path, absl::StrCat("target module '", t.get<std::string>(),
                                      "' is not a projection of Llama 2 (",
                                      kProjectionList, ")"));
  }
  return absl::OkStatus();
}
} // namespace

double LoraAdapter::scaling() const {
  return alpha / (rslora ? std::sqrt(double(rank)) : double(rank));
}

absl::StatusOr<LoraAdapter> LoraAdapter::open(const std::string &spec) {
  LoraAdapter a;
  a.folder = spec;
  if (size_t colon = spec.rfind(':'); colon != std::string::npos) {
    double w;
    if (absl::SimpleAtod(spec.substr(colon + 1), &w)) {
      if (!std::isfinite(w))
        return fault(spec, "the adapter's weight is not a finite number");
      a.folder = spec.substr(0, colon);
      a.weight = w;
    }
  }
  if (absl::Status s = readConfig(a.folder + "/adapter_config.json", a);
      !s.ok())
    return s;
  const std::string path = a.folder + "/adapter_model.safetensors";
  auto file = SafeTensorsFile::open(path);
  if (!file.ok())
    return file.status();
  a.file = std::move(*file);
  constexpr std::string_view prefix = "base_model.model.";
  for (const auto &[name, view] : a.file->tensors()) {
    std::string_view key = name;
    bool isA = key.ends_with(".lora_A.weight"),
         isB = key.ends_with(".lora_B.weight");
    std::string_view module =
        key.substr(0, key.size() - std::string_view(".lora_A.weight").size());
    if (module.starts_with(prefix))
      module.remove_prefix(prefix.size());
    if (!key.starts_with(prefix) || !(isA || isB) ||
        !isProjectionModule(module))
      return fault(path, absl::StrCat("tensor '", name,
                                      "' is not the lora_A or lora_B of a "
                                      "Llama 2 projection (",
                                      kProjectionList, ")"));
    if (view.shape.size() != 2 || !isFloat(view.dtype) ||
        (isA ? view.shape[0] : view.shape[1]) != a.rank)
      return fault(path, absl::StrCat("tensor '", name, "' has shape ",
                                      shapeString(view.shape), " (",
                                      dtypeName(view.dtype), "); a LoRA ",
                                      isA ? "A is [r, in]" : "B is [out, r]",
                                      " of floats with r = ", a.rank));
    Pair &p = a.modules[std::string(module) + ".weight"];
    (isA ? p.a : p.b) = &view;
  }
  if (a.modules.empty())
    return fault(path, "holds no lora_A or lora_B tensor");
  for (const auto &[weight, p] : a.modules)
    if (!p.a || !p.b)
      return fault(path,
                   absl::StrCat("module '", weight.substr(0, weight.size() - 7),
                                "' has a lora_", p.a ? "A" : "B",
                                " but no lora_", p.a ? "B" : "A"));
  return a;
}

absl::Status mergeLora(WeightSet &weights,
                       const std::vector<LoraAdapter> &adapters,
                       int64_t headDim) {
  // Every adapted weight once, its adapters in order.
  std::map<std::string,
           std::vector<std::pair<const LoraAdapter *, LoraAdapter::Pair>>>
      byWeight;
  for (const LoraAdapter &a : adapters)
    for (const auto &[name, pair] : a.modules)
      byWeight[name].push_back({&a, pair});
  for (const auto &[name, uses] : byWeight) {
    const LoraAdapter &first = *uses.front().first;
    const TensorView *w = weights.find(name);
    if (weights.prequantized(name)) // GPTQ/AWQ modules, GGUF blocks
      return fault(
          first.folder,
          absl::StrCat("adapts '", name, "', which ", weights.origin(),
                       " stores",
                       w ? absl::StrCat(" as ", dtypeName(w->dtype)) : "",
                       ", pre-quantized: LoRA merges into float "
                       "weights (merge it into the float checkpoint, "
                       "then quantize)"));
    if (!w)
      return fault(first.folder, absl::StrCat("adapts '", name, "', which ",
                                              weights.origin(), " lacks"));
    const int64_t out = w->shape.size() == 2 ? w->shape[0] : -1,
                  in = w->shape.size() == 2 ? w->shape[1] : -1;
    std::vector<float> merged(w->numElements()); // [out, in]
    w->toFloat(merged.data());
    // Meta's q/k row m is Hugging Face's row (h, m % 2, m % headDim / 2).
    const bool permute =
        weights.metaRowOrder() && (absl::StrContains(name, "q_proj") ||
                                   absl::StrContains(name, "k_proj"));
    for (const auto &[adapter, pair] : uses) {
      const TensorView &a = *pair.a, &b = *pair.b;
      if (a.shape[1] != in || b.shape[0] != out)
        return fault(adapter->file->path(),
                     absl::StrCat("'", name, "' is ", shapeString(w->shape),
                                  " in the base model, but its lora_A is ",
                                  shapeString(a.shape), " and its lora_B ",
                                  shapeString(b.shape),
                                  " (A [r, in], B [out, r])"));
      const int64_t r = adapter->rank;
      std::vector<float> fa(a.numElements()), fb(b.numElements()); // A [r, in]
      a.toFloat(fa.data());                                        // B [out, r]
      b.toFloat(fb.data());
      const float s = float(adapter->weight * adapter->scaling());
      std::vector<float> delta(in); // one row of B A
      for (int64_t m = 0; m < out; ++m) {
        int64_t o = m;
        if (permute) {
          const int64_t h = m / headDim, e = m % headDim;
          o = h * headDim + (e % 2) * (headDim / 2) + e / 2;
        }
        std::fill(delta.begin(), delta.end(), 0.0f);
        for (int64_t k = 0; k < r; ++k) {
          const float bk = fb[o * r + k];
          const float *ak = &fa[k * in];
          for (int64_t i = 0; i < in; ++i)
            delta[i] += bk * ak[i];
        }
        for (int64_t i = 0; i < in; ++i)
          merged[m * in + i] += s * delta[i];
      }
    }
    // Stored as the base stores it (one rounding), f32 for block types.
    const DType type = w->dtype == DType::F16 || w->dtype == DType::BF16
                           ? w->dtype
                           : DType::F32;
    std::vector<uint8_t> bytes(merged.size() * (type == DType::F32 ? 4 : 2));
    for (size_t i = 0; i < merged.size(); ++i) {
      if (type == DType::F32) {
        std::memcpy(&bytes[4 * i], &merged[i], 4);
        continue;
      }
      uint16_t h =
          type == DType::F16 ? floatToHalf(merged[i]) : floatToBf16(merged[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
    weights.replace(name, type, std::move(bytes));
  }
  return absl::OkStatus();
}

} // namespace kiln
