//===- Serve.cpp - kiln serve: a model or bundle behind the server --------===//
//
//   kiln serve MODEL|BUNDLE [--weights FOLDER | --random-weights]
//              [--device auto|emu|cuda] [--fallback MODEL|BUNDLE
//              [--fallback-weights FOLDER]] [server flags: docs/serve.md]
//
// A model folder or preset is compiled on the way (the flags of kiln
// compile apply); a bundle runs as compiled. The server itself is serve/,
// which kiln-run --serve shares.
//
//===----------------------------------------------------------------------===//
#include "runtime/Bundle.h"
#include "runtime/RunOptions.h"
#include "runtime/cuda/CudaDevice.h"
#include "serve/ModelLoad.h"
#include "tools/kiln/Commands.h"

#include "absl/strings/str_cat.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace {
namespace cl = llvm::cl;

cl::opt<std::string> model(cl::Positional, cl::desc("MODEL|BUNDLE"),
                           cl::sub(serveCommand()));
cl::opt<std::string> weightsFolder(
    "weights",
    cl::desc("The checkpoint folder (a bundle's weights; default: the model "
             "folder)"),
    cl::value_desc("folder"), cl::sub(serveCommand()));
cl::opt<bool> randomWeights(
    "random-weights",
    cl::desc("Seeded random weights (benchmarks; prompts are token ids)"),
    cl::sub(serveCommand()));
cl::opt<std::string> device("device",
                            cl::desc("auto (the GPU, else emu), emu or cuda"),
                            cl::init("auto"), cl::sub(serveCommand()));
cl::opt<std::string> tokenizerFile(
    "tokenizer",
    cl::desc("A SentencePiece tokenizer.model (default: the weights "
             "folder's)"),
    cl::value_desc("file"), cl::sub(serveCommand()));
cl::opt<std::string> fallbackModel(
    "fallback",
    cl::desc("A smaller model (or bundle) that takes new requests while the "
             "main queue is above 80% or its device unhealthy"),
    cl::value_desc("model"), cl::sub(serveCommand()));
cl::opt<std::string>
    fallbackWeights("fallback-weights",
                    cl::desc("The fallback bundle's checkpoint folder"),
                    cl::value_desc("folder"), cl::sub(serveCommand()));

/// The server's own flags (serve/ServeOptions.h), as strings: checked by
/// setServeFlag, as kiln-run checks them.
std::vector<std::unique_ptr<cl::opt<std::string>>> &serveFlags() {
  static auto *flags = [] {
    auto *v = new std::vector<std::unique_ptr<cl::opt<std::string>>>();
    for (const serve::ServeFlag *f = serve::kServeFlags; f->name; ++f)
      v->push_back(std::make_unique<cl::opt<std::string>>(
          llvm::StringRef(f->name), cl::desc(f->help),
          cl::sub(serveCommand())));
    return v;
  }();
  return *flags;
}
[[maybe_unused]] const bool registered = !serveFlags().empty();

/// A model folder or preset compiled for `where` (emu or cuda), its
/// weights packed, its tokenizer opened.
absl::StatusOr<serve::LoadedModel>
compileForServing(const serve::ModelSourceFlags &source) {
  auto opts = frontendOptions();
  if (!opts.ok())
    return opts.status();
  auto knobs = codegenOptions();
  if (!knobs.ok())
    return knobs.status();
  mlir::MLIRContext ctx;
  auto compiled = compileModel(ctx, source.path, *opts);
  if (!compiled.ok())
    return compiled.status();
  const LlamaConfig &c = compiled->source.config;
  std::string folder =
      source.weights.empty() ? compiled->source.folder : source.weights;
  serve::LoadedModel out;
  out.name = compiled->source.name;
  auto tokenizer = serve::openServeTokenizer(source.tokenizer, folder);
  if (!tokenizer.ok())
    return tokenizer.status();
  out.tokenizer = std::move(*tokenizer);
  std::unique_ptr<WeightSet> weights;
  auto lora = loraSpecs();
  if (!lora.ok())
    return lora.status();
  if (!source.random) {
    auto opened = openCheckpoint(folder, compiled->weights, *lora, c.headDim());
    if (!opened.ok())
      return opened.status();
    weights = std::move(*opened);
  } else if (!lora->empty()) {
    return absl::InvalidArgumentError(
        "--lora: merges into a checkpoint's weights, not --random-weights");
  }
  auto device = planDeviceFor(*compiled, *knobs, source.device,
                              source.random ? nullptr : weights.get());
  if (!device.ok())
    return device.status();
  out.device = std::move(*device);
  return out;
}

serve::ModelLoader loaderFor(serve::ModelSourceFlags source, int64_t maxBatch) {
  if (looksLikeBundle(source.path))
    return [=] { return serve::loadBundle(source, maxBatch); };
  return [=] { return compileForServing(source); };
}

} // namespace

int runServe() {
  serve::ServeOptions options;
  for (auto &flag : serveFlags())
    if (flag->getNumOccurrences() > 0)
      if (absl::Status s =
              serve::setServeFlag(options, std::string(flag->ArgStr), *flag);
          !s.ok())
        return fail(s, 2);
  options.maxBatch = maxBatchFlag;
  if (model.empty())
    return fail(absl::InvalidArgumentError(
                    "name the model or bundle to serve: kiln serve MODEL"),
                2);
  if (randomWeights && !weightsFolder.empty())
    return fail(absl::InvalidArgumentError(
                    "--random-weights: takes no --weights folder"),
                2);
  if (device != "auto" && device != "emu" && device != "cuda")
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--device: '", std::string(device),
                    "' is not a device a server runs (auto, emu, cuda)")),
                2);
  if (looksLikeBundle(model) && weightsFolder.empty() && !randomWeights)
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    std::string(model),
                    ": a bundle holds no weights: name the model folder "
                    "with --weights (or --random-weights)")),
                2);
  if (!fallbackWeights.empty() && fallbackModel.empty())
    return fail(absl::InvalidArgumentError(
                    "--fallback-weights: needs --fallback MODEL"),
                2);
  std::string where = device;
  if (where == "auto") {
    auto gpu = probeCudaGpu();
    where = gpu.ok() ? "cuda" : "emu";
    if (!gpu.ok()) {
      std::string why(gpu.status().message());
      llvm::errs() << "kiln: no GPU (" << why.substr(0, why.find(';'))
                   << "): serving on emu\n";
    }
  }
  serve::ModelSourceFlags main{model, weightsFolder, randomWeights,
                               where, tokenizerFile, {}};
  serve::ModelLoader fallback;
  if (!fallbackModel.empty())
    fallback = loaderFor(
        {fallbackModel, fallbackWeights, randomWeights, where, "", {}},
        options.maxBatch);
  return serve::serve(options, loaderFor(main, options.maxBatch), fallback);
}

} // namespace kiln
