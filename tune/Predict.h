//===- Predict.h - a step's time on a modelled GPU --------------*- C++ -*-===//
//
// kiln compile --stats' predictions (docs/cost-model.md): every launch of
// a step, as the Program runs it, with the bytes and FLOPs of its op
// (KernelCost, or cuBLAS's GEMM shape) and the facts the SASS audit read
// from its kernel (registers, shared memory, bytes in flight in the
// steady-state loop, the compute loop's instruction mix), through the cost
// model (tune/CostModel.h). A prediction, not a measurement: the model
// ignores what it cannot see (docs/cost-model.md says what).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TUNE_PREDICT_H
#define KILN_TUNE_PREDICT_H

#include "codegen/CudaKernel.h"
#include "inspect/SassAudit.h"
#include "runtime/Program.h"
#include "tune/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// What the cost model takes from a kernel's SASS audit.
struct KernelFacts {
  int registers = 0;
  int64_t sharedBytes = 0; // a block's, static and dynamic
  /// Bytes each thread keeps in flight: its steady-state loop's (the loads
  /// issued before the first use of one), or, for a kernel without a loop
  /// that loads, every global load it makes (all issued at once).
  double bytesInFlight = 0;
  bool inFlightFromLoop = false;
  /// Programmatic dependent launch: the kernel waits for the previous grid
  /// (ACQBULK) and triggers its dependents (PREEXIT).
  bool waits = false, triggers = false;
  /// One warp's pass through its compute loop (the whole kernel, each
  /// instruction once, when no loop computes).
  WarpWork work;
};
KernelFacts kernelFacts(const sass::KernelAudit &audit);

/// The facts of every kernel audited for `target`, by kernel name.
std::map<std::string, KernelFacts>
kernelFacts(const std::vector<sass::KernelAudit> &audits,
            const std::string &target);

/// A step: a decode of `rows` sequences (one new token each) that attend
/// `context` keys each, or a prefill of a `rows`-token prompt from position
/// 0 (its context is the prompt).
struct StepShape {
  bool prefill = false;
  int64_t rows = 1;
  int64_t context = 1;
};
/// "decode, batch 1, 128 keys" or "prefill, 2048 tokens".
std::string describe(const StepShape &shape);

/// One kernel's launches in a step.
struct KernelPrediction {
  std::string kernel; // the kernel's name, or "cublas" (every cuBLAS GEMM)
  int64_t calls = 0;
  double bytes = 0, flops = 0; // over all its calls
  bool tensorCores = false;
  /// Microseconds over all its calls, launch overhead included; none
  /// without the kernel's facts.
  std::optional<double> micros;
  double launchMicros = 0; // of `micros`, the launch overhead
  /// What limits its longest call: "memory", "bytes in flight",
  /// "latency", the pipe of a compute-bound kernel ("FMA pipe", "tensor
  /// cores", "shared memory", "SFU", "issue"), or cuBLAS's "tensor peak" /
  /// "memory".
  std::string bound;
};

struct StepPrediction {
  StepShape shape;
  std::string gpu; // GpuModel::shortName
  /// By predicted time (then bytes), most first.
  std::vector<KernelPrediction> kernels;
  int64_t launches = 0;
  double bytes = 0, flops = 0;
  /// The step, when every kernel has its facts.
  std::optional<double> micros;
  /// Of which launch overhead: launches x GpuModel::launchMicros, less what
  /// programmatic dependent launch hides of the `dependentLaunches`.
  double launchMicros = 0;
  int64_t dependentLaunches = 0;
  std::vector<std::string> unaudited; // kernels without facts
  /// The first kernel whose name starts with `prefix`, by predicted time.
  const KernelPrediction *find(llvm::StringRef prefix) const;
  /// The kernel named `name`.
  const KernelPrediction *kernel(llvm::StringRef name) const;
};

/// The plan of `program` that runs `shape`, or why none does (a context
/// past the KV pool's, a batch without batch plans or past the largest).
llvm::Expected<const StepPlan *> planForStep(const Program &program,
                                             const StepShape &shape);

/// The prediction of one step of `program` (built from `module` with
/// `opts`) on `gpu`. Launches of the LM head that run only when a prefill's
/// logits are read back are left out (a server reads none). A prefill whose
/// count is below its bucket's scales each kernel's blocks by the count.
llvm::Expected<StepPrediction>
predictStep(mlir::ModuleOp module, const Program &program,
            const CodegenOptions &opts,
            const std::map<std::string, KernelFacts> &facts,
            const GpuModel &gpu, const StepShape &shape);

} // namespace kiln

#endif // KILN_TUNE_PREDICT_H
