//===- Weights.cpp - open a model folder's safetensors --------------------===//
#include "runtime/Weights.h"
#include "runtime/GgufFile.h"
#include "runtime/GgufModel.h"
#include "runtime/Llama2cCheckpoint.h"
#include "runtime/QuantizedCheckpoint.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace kiln {
namespace {
absl::Status fault(const std::string &path, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

std::string join(const std::string &folder, const std::string &file) {
  return (std::filesystem::path(folder) / file).string();
}

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Reads model.safetensors.index.json: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>>
readIndex(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fault(path, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const std::exception &e) {
    return fault(path, "not valid JSON");
  }
  auto it = json.is_object() ? json.find("weight_map") : json.end();
  if (it == json.end() || !it->is_object())
    return fault(path, "has no 'weight_map' object");
  std::map<std::string, std::string> map;
  for (auto &[name, file] : it->items()) {
    if (!file.is_string())
      return fault(path, absl::StrCat("weight_map entry '", name,
                                      "' is not a file name"));
    std::string f = file.get<std::string>();
    // Shards sit beside the index; anything else is a broken or hostile map.
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      return fault(path, absl::StrCat("weight_map entry '", name, "' names '",
                                      f, "', not a file in the folder"));
    map.emplace(name, f);
  }
  return map;
}

/// The folder's config.json quantization_config, when it has one: the
/// layout of its pre-quantized modules.
absl::StatusOr<std::shared_ptr<const QuantizationConfig>>
readQuantization(const std::string &folder) {
  std::string path = join(folder, "config.json");
  if (!isFile(path))
    return nullptr;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fault(path, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  auto cfg = readQuantizationConfig(text.str(), path);
  if (!cfg.ok())
    return cfg.status();
  if (!cfg->has_value())
    return nullptr;
  return std::make_shared<const QuantizationConfig>(**cfg);
}
} // namespace

WeightSet::WeightSet() = default;
WeightSet::~WeightSet() = default;

bool WeightSet::present(const std::string &folder) {
  return isFile(join(folder, "model.safetensors")) ||
         isFile(join(folder, "model.safetensors.index.json")) ||
         isFile(folder); // GGUF or llama2.c: open() checks which
}

absl::Status WeightSet::openGguf(const std::string &path) {
  origin_ = path;
  auto file = GgufFile::open(path);
  if (!file.ok())
    return file.status();
  gguf_ = std::move(*file);
  ggufFormats_ = ggufProjectionFormats(*gguf_).value_or(
      std::map<std::string, QuantFormat>());
  for (const GgufTensor &t : gguf_->tensors()) {
    std::string name = ggufToHuggingFaceName(t.name);
    if (name.empty())
      continue; // not a tensor of Llama 2 (rope_freqs, ...)
    auto dtype = dtypeOfGgml(t.type);
    if (!dtype) {
      unreadable_[name] = ggmlTypeInfo(t.type).name;
      continue;
    }
    auto view = std::make_unique<TensorView>(
        TensorView{t.name, *dtype, t.shape(), t.data, size_t(t.bytes)});
    byName_[name] = view.get();
    ggufViews_.push_back(std::move(view));
  }
  return absl::OkStatus();
}

absl::Status WeightSet::openLlama2c(const std::string &path) {
  origin_ = path;
  auto file = Llama2cCheckpoint::open(path);
  if (!file.ok())
    return file.status();
  llama2c_ = std::move(*file);
  for (auto &[name, view] : llama2c_->tensors())
    byName_[name] = &view;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WeightSet>>
WeightSet::open(const std::string &folder) {
  auto set = std::make_unique<WeightSet>();
  if (isFile(folder)) {
    // Not GGUF: a llama2.c checkpoint, whose reader says what is wrong.
    absl::Status s =
        GgufFile::looksLikeGguf(folder) || absl::EndsWith(folder, ".gguf")
            ? set->openGguf(folder)
            : set->openLlama2c(folder);
    if (!s.ok())
      return s;
    return set;
  }
  auto quant = readQuantization(folder);
  if (!quant.ok())
    return quant.status();
  set->quant_ = std::move(*quant);
  std::string single = join(folder, "model.safetensors");
  std::string index = join(folder, "model.safetensors.index.json");
  if (isFile(single)) {
    set->origin_ = single;
    auto file = SafeTensorsFile::open(single);
    if (!file.ok())
      return file.status();
    for (auto &[name, view] : (*file)->tensors())
      set->byName_[name] = &view;
    set->files_.push_back(std::move(*file));
    return set;
  }
  if (!isFile(index))
    return fault(folder, "has neither model.safetensors nor "
                         "model.safetensors.index.json");
  set->origin_ = index;
  auto map = readIndex(index);
  if (!map.ok())
    return map.status();
  std::map<std::string, SafeTensorsFile *> shards;
  for (auto &[name, shard] : *map) {
    SafeTensorsFile *&file = shards[shard];
    if (!file) {
      auto opened = SafeTensorsFile::open(join(folder, shard));
      if (!opened.ok())
        return opened.status();
      file = opened->get();
      set->files_.push_back(std::move(*opened));
    }
    const TensorView *view = file->find(name);
    if (!view)
      return fault(file->path(), absl::StrCat("has no tensor '", name,
                                              "', which the index places "
                                              "there"));
    set->byName_[name] = view;
  }
  return set;
}

void WeightSet::replace(const std::string &name, DType dtype,
                        std::vector<uint8_t> bytes) {
  const TensorView *old = find(name);
  auto view = std::make_unique<TensorView>(*old);
  view->dtype = dtype;
  view->numBytes = bytes.size();
  view->data = bytes.data(); // stays put when the vector moves
  replacedBytes_.push_back(std::move(bytes));
  byName_[name] = view.get();
  replacedViews_.push_back(std::move(view));
}

const TensorView *WeightSet::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

std::string WeightSet::moduleOf(const std::string &name) {
  return absl::EndsWith(name, ".weight")
             ? name.substr(0, name.size() - std::string_view(".weight").size())
             : name;
}

bool WeightSet::prequantized(const std::string &name) const {
  if (gguf_) {
    const TensorView *t = find(name);
    return t && isGgmlBlock(t->dtype) && ggufFormats_.count(name);
  }
  return quant_ && absl::EndsWith(name, ".weight") && !find(name) &&
         find(moduleOf(name) + ".qweight");
}

absl::StatusOr<QuantizedMatrix>
WeightSet::readQuantized(const std::string &name, int64_t rows,
                         int64_t cols) const {
  if (!prequantized(name))
    return fault(origin_, absl::StrCat("weight '", name,
                                       "' is not stored pre-quantized"));
  if (!gguf_)
    return readQuantizedLinear(*this, moduleOf(name), *quant_, rows, cols);
  const TensorView *t = find(name);
  if (t->shape != std::vector<int64_t>{rows, cols})
    return fault(origin_, absl::StrCat("tensor '", t->name, "' has shape ",
                                       shapeString(t->shape),
                                       ", the model "
                                       "needs ",
                                       shapeString({rows, cols})));
  return ggmlToCanonical(*ggmlTypeOf(t->dtype), t->data, rows, cols,
                         ggufFormats_.at(name));
}

absl::Status WeightSet::check(const std::vector<WeightSpec> &specs) const {
  for (const WeightSpec &spec : specs) {
    if (gguf_ && prequantized(spec.name)) {
      const TensorView *t = find(spec.name);
      std::string stored =
          absl::StrCat("tensor '", t->name, "' is ", dtypeName(t->dtype),
                       ", kiln's ", ggufFormats_.at(spec.name).name());
      if (!spec.quant || *spec.quant != ggufFormats_.at(spec.name))
        return fault(origin_,
                     absl::StrCat("weight '", spec.name,
                                  "' is stored "
                                  "pre-quantized (",
                                  stored,
                                  "); the model was compiled to hold it as ",
                                  spec.quant ? spec.quant->name() : "floats",
                                  ": compile it from this file"));
      if (t->shape != spec.shape)
        return fault(origin_,
                     absl::StrCat("tensor '", t->name, "' has shape ",
                                  shapeString(t->shape), ", the config needs ",
                                  shapeString(spec.shape)));
      continue;
    }
    if (prequantized(spec.name)) {
      // Stored as GPTQ/AWQ modules: the model must hold them in their own
      // format (the kernels take the codes as they are, never requantized).
      const QuantizationConfig &q = *quant_;
      std::string module = moduleOf(spec.name);
      std::string stored = absl::StrCat(
          q.describe(), ", '", module, ".qweight', kiln's ", q.format().name());
      if (!spec.quant)
        return fault(origin_,
                     absl::StrCat("weight '", spec.name,
                                  "' is stored pre-quantized (", stored,
                                  "); the model was compiled for float "
                                  "weights: compile it from this checkpoint"));
      if (*spec.quant != q.format())
        return fault(origin_,
                     absl::StrCat("weight '", spec.name,
                                  "' is stored pre-quantized (", stored,
                                  "); the model was compiled to hold it as ",
                                  spec.quant->name(),
                                  ": compile it from this checkpoint"));
      if (spec.shape.size() != 2)
        return fault(origin_, absl::StrCat("weight '", spec.name,
                                           "' is stored pre-quantized, but "
                                           "the model needs it of shape ",
                                           shapeString(spec.shape)));
      if (absl::Status s = checkQuantizedLinear(*this, module, q, spec.shape[0],
                                                spec.shape[1]);
          !s.ok())
        return s;
      continue;
    }
    const TensorView *t = find(spec.name);
    if (!t && quant_ && spec.quant)
      return fault(origin_,
                   absl::StrCat("missing weight '", spec.name, "' (and its ",
                                quant_->describe(), " module's '",
                                moduleOf(spec.name), ".qweight')"));
    if (auto it = unreadable_.find(spec.name); !t && it != unreadable_.end())
      return fault(origin_,
                   absl::StrCat("weight '", spec.name, "' is of ggml type ",
                                it->second,
                                ", which kiln does not read (F32, F16, BF16, "
                                "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, "
                                "Q6_K)"));
    if (!t)
      return fault(origin_, absl::StrCat("missing weight '", spec.name, "'"));
    // A GGUF tensor's own name, too: the one its file knows it by.
    std::string what =
        t->name == spec.name
            ? absl::StrCat("weight '", spec.name, "'")
            : absl::StrCat("weight '", spec.name, "' (tensor '", t->name, "')");
    if (spec.quant && gguf_ && !isFloat(t->dtype))
      return fault(origin_, absl::StrCat(what, " is ", dtypeName(t->dtype),
                                         ", which cannot be quantized again "
                                         "to ",
                                         spec.quant->name()));
    if (!isFloat(t->dtype) && !isGgmlBlock(t->dtype))
      return fault(origin_,
                   absl::StrCat(what, " has dtype ", dtypeName(t->dtype),
                                "; weights must be F32, F16 or "
                                "BF16"));
    if (t->shape != spec.shape)
      return fault(origin_,
                   absl::StrCat(what, " has shape ", shapeString(t->shape),
                                ", the config needs ",
                                shapeString(spec.shape)));
  }
  return absl::OkStatus();
}

} // namespace kiln
