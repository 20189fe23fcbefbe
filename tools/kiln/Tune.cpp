//===- Tune.cpp - kiln tune -----------------------------------------------===//
#include "codegen/KernelCache.h"
#include "runtime/Bundle.h"
#include "runtime/Progress.h"
#include "tools/kiln/Commands.h"
#include "tune/Tuner.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace cl = llvm::cl;

namespace kiln {
namespace {
cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL | BUNDLE]"),
                           cl::init("tiny-gqa"), cl::sub(tuneCommand()));
cl::opt<std::string> seqLensFlag(
    "seq-lens",
    cl::desc("Sequence lengths to tune at, ascending (prompt tokens for "
             "prefill, keys for decode): 1,2,4,...,4096"),
    cl::init("1,2,4,8,16,32,64,128,256,512,1024,2048,4096"),
    cl::sub(tuneCommand()));
cl::opt<std::string> batchFlag("batch",
                               cl::desc("Batch sizes for the batched "
                                        "families (decode attention): 1,8,32"),
                               cl::init("1"), cl::sub(tuneCommand()));
cl::opt<std::string> familiesFlag(
    "families",
    cl::desc("Families to tune (default all): decode.gemv, decode.attention, "
             "prefill.attention, prefill.epilogue"),
    cl::sub(tuneCommand()));
cl::opt<std::string> targetFlag("target",
                                cl::desc("The GPU's target: sm_90 (default, "
                                         "H200) or sm_80 (A100)"),
                                cl::init("sm_90"), cl::sub(tuneCommand()));
cl::opt<std::string>
    plotDir("plot-dir",
            cl::desc("Write an SVG per family and batch: time against sequence "
                     "length for the best candidates, buckets marked"),
            cl::value_desc("folder"), cl::sub(tuneCommand()));

/// "1,2,4": positive, strictly ascending.
absl::StatusOr<std::vector<int64_t>>
parseLengths(const std::string &flag, const std::string &text, int64_t most) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v) || v < 1 || v > most ||
        (!out.empty() && v <= out.back()))
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": '", std::string(part), "' is not a length from 1 to ",
          most, " above the one before it"));
    out.push_back(v);
  }
  return out;
}
} // namespace

int runTune() {
  if (tuningDbFlag.empty())
    return fail(absl::InvalidArgumentError(
                    "--tuning-db: name the file the results go in"),
                2);
  auto batches = parseLengths("batch", batchFlag, 1024);
  if (!batches.ok())
    return fail(batches.status(), 2);
  std::vector<std::string> families;
  for (absl::string_view f :
       absl::StrSplit(std::string(familiesFlag), ',', absl::SkipEmpty())) {
    bool known = false;
    for (const TuneFamily &k : tuneFamilies())
      known = known || k.name == f;
    if (!known)
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      "--families: no family '", std::string(f),
                      "' (decode.gemv, decode.attention, prefill.attention, "
                      "prefill.epilogue)")),
                  2);
    families.push_back(std::string(f));
  }
  auto opts = frontendOptions();
  if (!opts.ok())
    return fail(opts.status(), 2);
  // The kernels' shapes come from the IR: a bundle is tuned through the
  // model it was compiled from.
  std::string name = model;
  if (looksLikeBundle(model)) {
    auto bundle = readBundle(model);
    if (!bundle.ok())
      return fail(bundle.status());
    name = bundle->model;
    llvm::errs() << "kiln: tuning " << name << ", which " << model
                 << " was compiled from\n";
  }
  mlir::MLIRContext ctx;
  auto compiled = compileModel(ctx, name, *opts);
  if (!compiled.ok())
    return fail(compiled.status());
  if (absl::Status s = checkWeightsIfPresent(*compiled); !s.ok())
    return fail(s);
  auto seqLens = parseLengths("seq-lens", seqLensFlag,
                              compiled->source.config.maxPositions);
  if (!seqLens.ok())
    return fail(seqLens.status(), 2);
  TuneOptions tuneOpts;
  tuneOpts.seqLens = *seqLens;
  tuneOpts.batches = *batches;
  tuneOpts.families = families;
  tuneOpts.target = targetFlag;
  tuneOpts.dbPath = tuningDbFlag;
  tuneOpts.plotDir = plotDir;
  if (!plotDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(plotDir.c_str()))
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--plot-dir: ", std::string(plotDir), ": ", ec.message())));
  KernelCache cache(cacheDirFlag.empty() ? KernelCache::defaultDir()
                                         : std::string(cacheDirFlag));
  std::optional<Progress> progress; // "kiln: tune  40% (12 of 30 lengths)"
  auto result = tune(*compiled->module, tuneOpts, cache,
                     [&](int64_t done, int64_t total) {
                       if (!progress)
                         progress.emplace("tune", total, 0, "lengths");
                       progress->update(done);
                     });
  progress.reset();
  if (!result)
    return fail(absl::InvalidArgumentError(
        absl::StrCat(name, ": ", llvm::toString(result.takeError()))));
  auto &os = llvm::outs();
  os << "kiln: tuned " << compiled->source.name << " for "
     << std::string(targetFlag) << " with the cost model: " << result->computed
     << " times computed, " << result->resumed << " resumed from "
     << std::string(tuningDbFlag) << "\n";
  for (const std::string &line : result->lines)
    os << "  " << line << "\n";
  for (const std::string &plot : result->plots)
    os << "  plot      " << plot << "\n";
  return 0;
}

} // namespace kiln
