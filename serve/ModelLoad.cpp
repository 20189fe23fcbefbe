//===- ModelLoad.cpp ------------------------------------------------------===//
#include "serve/ModelLoad.h"

#include "runtime/Bundle.h"
#include "runtime/BundleDevice.h"
#include "runtime/RunOptions.h"
#include "runtime/SentencePieceBpe.h"

#include <cstdio>
#include <filesystem>

namespace kiln::serve {

absl::StatusOr<std::unique_ptr<TextTokenizer>>
openServeTokenizer(const std::string &flag, const std::string &folder) {
  std::string path = flag;
  if (path.empty() && !folder.empty() &&
      std::filesystem::exists(folder + "/tokenizer.model"))
    path = folder + "/tokenizer.model";
  if (path.empty()) {
    std::fprintf(stderr, "kiln serve: no tokenizer.model: prompts are token "
                         "ids and replies carry token_ids only\n");
    return std::unique_ptr<TextTokenizer>();
  }
  auto opened = SentencePieceBpe::open(path);
  if (!opened.ok())
    return opened.status();
  return std::unique_ptr<TextTokenizer>(std::move(*opened));
}

/// The bundle's checkpoint (null with --random-weights).
static absl::StatusOr<std::unique_ptr<WeightSet>>
openBundleWeights(const ModelSourceFlags &source, const Bundle &bundle) {
  if (source.random)
    return std::unique_ptr<WeightSet>();
  return openCheckpoint(source.weights, manifestSpecs(bundle.program.weights),
                        bundle.lora, bundle.config.headDim());
}

absl::StatusOr<LoadedModel> loadBundle(const ModelSourceFlags &source,
                                       int64_t maxBatch) {
  auto bundle = readBundle(source.path);
  if (!bundle.ok())
    return bundle.status();
  if (absl::Status s = checkMaxBatch(maxBatch, bundle->program); !s.ok())
    return s;
  LoadedModel out;
  out.name = bundle->model;
  auto tokenizer = openServeTokenizer(source.tokenizer, source.weights);
  if (!tokenizer.ok())
    return tokenizer.status();
  out.tokenizer = std::move(*tokenizer);
  auto weights = openBundleWeights(source, *bundle);
  if (!weights.ok())
    return weights.status();
  // The device packs the weights as it opens: the checkpoint closes after.
  WeightProvider provider = source.random
                                ? WeightProvider::random(1)
                                : WeightProvider::checkpoint(**weights);
  if (!source.ranks.rendezvous.address.empty()) {
    ProcessRankOptions ranks = source.ranks;
    ranks.device = source.device;
    auto dev = openRankZero(*bundle, weights->get(), ranks);
    if (!dev.ok())
      return dev.status();
    out.device = std::move(*dev);
  } else {
    auto dev = openBundleDevice(*bundle, source.device, provider);
    if (!dev.ok())
      return dev.status();
    out.device = std::move(*dev);
  }
  return out;
}

absl::Status followServedBundle(const ModelSourceFlags &source) {
  auto bundle = readBundle(source.path);
  if (!bundle.ok())
    return bundle.status();
  auto weights = openBundleWeights(source, *bundle);
  if (!weights.ok())
    return weights.status();
  ProcessRankOptions ranks = source.ranks;
  ranks.device = source.device;
  return followAsRank(*bundle, weights->get(), ranks);
}

} // namespace kiln::serve
