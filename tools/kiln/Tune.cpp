//===- Tune.cpp - kiln tune -----------------------------------------------===//
#include "codegen/KernelCache.h"
#include "codegen/Nvrtc.h"
#include "runtime/Bundle.h"
#include "runtime/Progress.h"
#include "runtime/TimeCandidates.h"
#include "tools/kiln/Commands.h"
#include "tune/CostModel.h"
#include "tune/Measurements.h"
#include "tune/Tuner.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <unistd.h>

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
                                        "families (decode attention, and "
                                        "decode.gemm from 2): 1,8,32"),
                               cl::init("1"), cl::sub(tuneCommand()));
cl::opt<std::string> familiesFlag(
    "families",
    cl::desc("Families to tune (default all): decode.gemv, "
             "decode.quant-gemv, decode.attention, decode.gemm, "
             "prefill.attention, prefill.epilogue, prefill.elementwise, "
             "prefill.gemm, prefill.quant-gemm"),
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

cl::opt<std::string> knobsFlag(
    "knobs",
    cl::desc("Only these knob settings of the families' candidates, "
             "separated by ';' (default all): "
             "\"attention-warps=4,kv-splits=0;attention-warps=2,kv-splits=2\""),
    cl::sub(tuneCommand()));
cl::opt<std::string> emitCandidates(
    "emit-candidates",
    cl::desc("Write a bundle per candidate, one with the default knobs and "
             "candidates.json into this folder, for kiln-run "
             "--time-candidates on a GPU (docs/tuning-db.md)"),
    cl::value_desc("folder"), cl::sub(tuneCommand()));
cl::opt<std::string> measurementsFlag(
    "measurements",
    cl::desc("Add a GPU's measurements (kiln-run --time-candidates) to "
             "--tuning-db, and report speedups over the default knobs and "
             "the cost model's picks against them"),
    cl::value_desc("file.json"), cl::sub(tuneCommand()));

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

/// kiln tune --measurements FILE --tuning-db DB.
int importMeasurementsMain() {
  auto set = readMeasurementSet(measurementsFlag);
  if (!set.ok())
    return fail(set.status());
  auto db = readTuningDb(tuningDbFlag);
  if (!db.ok())
    return fail(db.status());
  auto lines = importMeasurements(*set, *db);
  if (!lines.ok())
    return fail(absl::InvalidArgumentError(absl::StrCat(
        std::string(measurementsFlag), ": ", lines.status().message())));
  if (absl::Status s = writeTuningDb(tuningDbFlag, *db); !s.ok())
    return fail(s);
  auto &os = llvm::outs();
  os << "kiln: added " << set->candidates.size() << " measurements of "
     << set->model << " on " << set->device << " (" << set->source
     << ", driver " << set->driver << ", " << set->repeats << " repeats) to "
     << std::string(tuningDbFlag) << "\n";
  for (const std::string &line : *lines)
    os << "  " << line << "\n";
  return 0;
}

/// The families and knob settings --families and --knobs ask for.
absl::StatusOr<std::vector<TuneFamily>>
chosenFamilies(const std::vector<std::string> &names) {
  std::vector<std::string> knobs;
  for (absl::string_view k :
       absl::StrSplit(std::string(knobsFlag), ';', absl::SkipEmpty()))
    knobs.push_back(std::string(k));
  std::vector<TuneFamily> out;
  std::map<std::string, bool> matched;
  for (const TuneFamily &f : tuneFamilies()) {
    if (!names.empty() && llvm::find(names, f.name) == names.end())
      continue;
    TuneFamily kept = f;
    if (!knobs.empty()) {
      kept.candidates.clear();
      for (const std::string &c : f.candidates)
        if (llvm::find(knobs, c) != knobs.end()) {
          kept.candidates.push_back(c);
          matched[c] = true;
        }
    }
    out.push_back(std::move(kept));
  }
  for (const std::string &k : knobs)
    if (!matched[k])
      return absl::InvalidArgumentError(absl::StrCat(
          "--knobs: '", k,
          "' is none of the chosen families' candidates (knobs in the order "
          "kiln tune lists them)"));
  return out;
}

/// kiln tune --emit-candidates DIR: the bundles and the manifest, written
/// into a folder beside DIR and renamed over it at the end.
int emitCandidatesMain(const std::string &name, FrontendOptions opts,
                       const std::vector<TuneFamily> &families,
                       const std::vector<int64_t> &batches) {
  auto gpu = gpuModelFor(targetFlag);
  if (!gpu)
    return fail(absl::InvalidArgumentError("--target " +
                                           std::string(targetFlag) +
                                           ": kiln tune knows sm_80 and sm_90"),
                2);
  std::string dir = emitCandidates;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (llvm::sys::fs::exists(dir) &&
      !llvm::sys::fs::exists(dir + "/candidates.json"))
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--emit-candidates: ", dir,
                     " exists and holds no candidates.json: name a new "
                     "folder")));
  // The lengths as the cases need them: prompts up to the longest, decode
  // contexts one token past the longest (the model's config bounds them).
  bool prompts = false, contexts = false;
  for (const TuneFamily &f : families)
    (f.length == "prompt" ? prompts : contexts) = true;
  auto source = resolveModel(name);
  if (!source.ok())
    return fail(source.status());
  auto seqLens = parseLengths("seq-lens", seqLensFlag,
                              source->config.maxPositions - (contexts ? 1 : 0));
  if (!seqLens.ok())
    return fail(seqLens.status(), 2);
  if (prompts)
    opts.prefillTokens = seqLens->back();
  if (contexts) {
    opts.maxContext = seqLens->back() + 1;
    opts.maxBatch = *std::max_element(batches.begin(), batches.end());
  }
  mlir::MLIRContext ctx;
  auto compiled = compileModel(ctx, name, opts);
  if (!compiled.ok())
    return fail(compiled.status());

  std::string tmp = absl::StrCat(dir, ".tmp.", ::getpid());
  llvm::sys::fs::remove_directories(tmp);
  auto cleanup =
      llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(tmp); });
  if (std::error_code ec = llvm::sys::fs::create_directories(tmp))
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--emit-candidates: ", tmp, ": ", ec.message())));
  CandidateSet set{compiled->source.name,
                   std::string(targetFlag),
                   nvrtcVersionString(),
                   "default.kiln",
                   {}};
  CodegenOptions base;
  base.smCount = gpu->sms;
  if (prompts)
    base.prefillBuckets = *seqLens; // a plan of exactly each length
  int64_t total = 1, done = 0;
  for (const TuneFamily &f : families)
    if (!f.batchesOf(batches).empty())
      total += int64_t(f.candidates.size());
  std::optional<Progress> progress; // "kiln: emit  40% (12 of 30 bundles)"
  auto step = [&] {
    if (!progress)
      progress.emplace("emit", total, 0, "bundles");
    progress->update(++done);
  };
  std::string report;
  if (absl::Status s = writeBundleFor(*compiled, base, {targetFlag},
                                      tmp + "/default.kiln", report);
      !s.ok())
    return fail(s);
  step();
  std::vector<std::string> skipped;
  for (const TuneFamily &f : families) {
    if (f.batchesOf(batches).empty()) { // decode.gemm with --batch 1 only
      skipped.push_back(absl::StrCat(f.name, ": its kernels run at batches of ",
                                     f.minBatch, " and more (--batch)"));
      continue;
    }
    CandidateFamily out;
    out.family = f.name;
    out.signature = familySignature(*compiled->module, f);
    out.prompt = f.length == "prompt";
    out.kernels = familyKernels(*compiled->module, f);
    for (int64_t length : *seqLens)
      for (int64_t batch : f.batchesOf(batches))
        out.cases.push_back({length, batch});
    for (size_t i = 0; i < f.candidates.size(); ++i) {
      CodegenOptions knobs = base;
      std::string file = absl::StrCat(f.name, "-", i, ".kiln");
      absl::Status s = absl::OkStatus();
      if (llvm::Error e = parseCodegenOptions(f.candidates[i], knobs))
        s = absl::InvalidArgumentError(toString(std::move(e)));
      else
        s = writeBundleFor(*compiled, knobs, {targetFlag}, tmp + "/" + file,
                           report);
      step();
      if (!s.ok()) { // a setting this model's kernels cannot take
        skipped.push_back(
            absl::StrCat(f.name, " ", f.candidates[i], ": ", s.message()));
        continue;
      }
      out.candidates.push_back({f.candidates[i], file});
    }
    set.families.push_back(std::move(out));
  }
  if (absl::Status s = writeCandidateSet(tmp + "/candidates.json", set);
      !s.ok())
    return fail(s);
  progress.reset();
  llvm::sys::fs::remove_directories(dir);
  if (std::error_code ec = llvm::sys::fs::rename(tmp, dir))
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--emit-candidates: ", dir, ": ", ec.message())));
  auto &os = llvm::outs();
  int64_t bundles = 1, cases = 0;
  for (const CandidateFamily &f : set.families) {
    bundles += int64_t(f.candidates.size());
    cases += int64_t(f.candidates.size() * f.cases.size());
  }
  os << "kiln: wrote " << bundles << " bundles of " << set.model << " for "
     << set.target << " (" << cases << " candidate cases) and candidates.json "
     << "to " << dir << "; time them with kiln-run --time-candidates " << dir
     << "\n";
  for (const std::string &line : skipped)
    os << "  skipped   " << line << "\n";
  return 0;
}

int runTune() {
  if (tuningDbFlag.empty() && emitCandidates.empty())
    return fail(absl::InvalidArgumentError(
                    "--tuning-db: name the file the results go in"),
                2);
  if (!emitCandidates.empty() && !measurementsFlag.empty())
    return fail(absl::InvalidArgumentError(
                    "--emit-candidates writes what a GPU measures and "
                    "--measurements reads what it measured: one at a time"),
                2);
  if (!measurementsFlag.empty())
    return importMeasurementsMain();
  auto batches = parseLengths("batch", batchFlag, 1024);
  if (!batches.ok())
    return fail(batches.status(), 2);
  std::vector<std::string> families;
  for (absl::string_view f :
       absl::StrSplit(std::string(familiesFlag), ',', absl::SkipEmpty())) {
    bool known = false;
    std::vector<std::string> names;
    for (const TuneFamily &k : tuneFamilies()) {
      known = known || k.name == f;
      names.push_back(k.name);
    }
    if (!known)
      return fail(absl::InvalidArgumentError(
                      absl::StrCat("--families: no family '", std::string(f),
                                   "' (", absl::StrJoin(names, ", "), ")")),
                  2);
    families.push_back(std::string(f));
  }
  auto opts = frontendOptions();
  if (!opts.ok())
    return fail(opts.status(), 2);
  auto chosen = chosenFamilies(families);
  if (!chosen.ok())
    return fail(chosen.status(), 2);
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
  if (!emitCandidates.empty())
    return emitCandidatesMain(name, *opts, *chosen, *batches);
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
  for (const TuneFamily &f : *chosen)
    tuneOpts.candidates[f.name] = f.candidates;
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
