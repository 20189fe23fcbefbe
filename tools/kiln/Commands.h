//===- Commands.h - the kiln subcommands ------------------------*- C++ -*-===//
#ifndef KILN_TOOLS_KILN_COMMANDS_H
#define KILN_TOOLS_KILN_COMMANDS_H

#include "codegen/CudaKernel.h"
#include "frontend/LlamaToKiln.h"
#include "frontend/ModelSource.h"
#include "inspect/SassAudit.h"
#include "runtime/Device.h"
#include "runtime/PlanDevice.h"
#include "tune/Predict.h"

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/CommandLine.h"

#include <functional>

namespace kiln {

/// The subcommands, built on first use so that options in any file can
/// name them during static initialization (cl::sub(compileCommand())).
llvm::cl::SubCommand &compileCommand();
llvm::cl::SubCommand &runCommand();
llvm::cl::SubCommand &inspectCommand();
llvm::cl::SubCommand &cacheCommand();
llvm::cl::SubCommand &tuneCommand();
llvm::cl::SubCommand &evalCommand(); // Eval.cpp
llvm::cl::SubCommand &serveCommand();

/// Options that compile and run share (defined in Options.cpp).
extern llvm::cl::opt<std::string> dtypeFlag;
extern llvm::cl::opt<bool> fusionFlag;
extern llvm::cl::opt<std::string> cacheDirFlag;
extern llvm::cl::opt<int64_t> maxBatchFlag;
extern llvm::cl::opt<std::string> tuningDbFlag;
/// --lora ADAPTER_DIR[:WEIGHT], repeatable: adapters merged at load.
extern llvm::cl::list<std::string> loraFlag;

/// The frontend options the shared flags (--dtype, --fusion, --rope-layout,
/// --prefill-tokens) ask for; a usage error names the bad flag.
absl::StatusOr<FrontendOptions> frontendOptions();

/// The kernel tuning knobs --kernel-options sets (the defaults otherwise).
absl::StatusOr<CodegenOptions> codegenOptions();

/// --tuning-db: the winners it holds for `module` at `target` into
/// `knobs`, and a line per entry (used, or ignored and why) in `report`.
/// Nothing without the flag.
absl::Status applyTuningDb(mlir::ModuleOp module, const std::string &target,
                           CodegenOptions &knobs, std::string &report);

/// Each returns the process exit code: 0, 1 (bad input) or 2 (bad usage).
int runCompile();
int runRun();
int runInspect();
/// kiln inspect FILE.gguf: its metadata and tensors (InspectGguf.cpp).
int inspectGguf(const std::string &path);
/// kiln inspect MODEL.bin: a llama2.c checkpoint (InspectLlama2c.cpp).
int inspectLlama2c(const std::string &path);
int runTune();
int runCache();
int runEval();
/// kiln serve (Serve.cpp).
int runServe();

/// The cuda device for a model compiled on the way (kiln run, kiln eval):
/// its kernels through NVRTC and the kernel cache (--cache-dir) for the
/// GPU's own target. Run.cpp.
absl::StatusOr<std::unique_ptr<Device>> cudaDeviceFor(Program program,
                                                      const WeightProvider &w);

struct CompiledModel;

/// The plan device of a compiled model on `where` (emu or cuda), tuned
/// for the GPU's target by --tuning-db (its report on stderr); a split
/// module's ranks as threads on emu (docs/tensor-parallel.md). `weights`
/// null: seeded random weights. Run.cpp; kiln run and kiln serve.
absl::StatusOr<std::unique_ptr<PlanDevice>>
planDeviceFor(CompiledModel &m, CodegenOptions knobs, const std::string &where,
              const WeightSet *weights);

/// Resolves a model and builds its verified kiln module; when the folder has
/// weights, checks their names and shapes (headers only) against the module.
struct CompiledModel {
  ModelSource source;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<WeightSpec> weights;
  /// LoRA adapters merged at load (loraSpecs()), which a bundle records.
  std::vector<std::string> lora = {};
};

/// --lora's adapters, each opened and checked, as "FOLDER:WEIGHT" with
/// FOLDER absolute (what a bundle records).
absl::StatusOr<std::vector<std::string>> loraSpecs();

/// A model folder's checkpoint, when it has one, checked against what the
/// module needs: a damaged folder is refused even where only its shapes are
/// used (compile, tune).
absl::Status checkWeightsIfPresent(const CompiledModel &m);

/// Called with the module after the frontend ("frontend") and after each
/// pipeline stage (named by its pass); an error stops the compile.
using StageHook =
    std::function<absl::Status(llvm::StringRef stage, mlir::ModuleOp module)>;
absl::StatusOr<CompiledModel> compileModel(mlir::MLIRContext &ctx,
                                           const std::string &model,
                                           const FrontendOptions &opts,
                                           const StageHook &afterStage = {});

/// The Program of `m` with `knobs`, its kernels compiled by NVRTC (through
/// the kernel cache) for `archs`, written as a bundle at `path`; a line for
/// the report in `report`.
absl::Status writeBundleFor(const CompiledModel &m, const CodegenOptions &knobs,
                            const std::vector<std::string> &archs,
                            const std::string &path, std::string &report);

/// kiln compile --stats: kernels per step in `unfused` and `fused`, HBM
/// bytes per decode token, arena and KV pool.
/// kiln compile --tp N --stats: a rank's weights against the model's, its
/// key/value heads, and the bytes of the collectives a decode token needs.
void printTensorParallel(mlir::ModuleOp fused, const LlamaConfig &config);

void printStats(mlir::ModuleOp fused, mlir::ModuleOp unfused,
                const LlamaConfig &config);

/// What kiln compile --stats' predictions need besides the module: the
/// Program and knobs it was built with, and the SASS audit of its kernels
/// for `target` (or why there is none).
struct PredictionInput {
  const Program *program = nullptr; // null: no plan to predict
  CodegenOptions knobs;
  std::string target; // the first --target (sm_90 without one)
  std::vector<sass::KernelAudit> audits;
  std::string unaudited;             // why there is no audit; empty: audited
  std::vector<StepShape> extraSteps; // --stats-step
};

/// The cost model's predictions (tune/Predict.h) of batch-1 decode steps
/// and a 2048-token prefill, and of `in.extraSteps`, on every GPU modelled
/// for the target: printed (with `print`), labelled as predictions, and
/// written as JSON to `jsonPath` (unless empty), which has each step's and
/// kernel's bytes and FLOPs also without an audit.
absl::Status printPredictions(mlir::ModuleOp fused, const std::string &model,
                              const PredictionInput &in, bool print,
                              const std::string &jsonPath);

/// Prints "kiln: error: <message>" on stderr and returns `code`.
int fail(const absl::Status &status, int code = 1);

} // namespace kiln

#endif // KILN_TOOLS_KILN_COMMANDS_H
