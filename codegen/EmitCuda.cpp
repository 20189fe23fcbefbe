//===- EmitCuda.cpp - every distinct kernel of a function -----------------===//
//
// Which template runs an op is the op's to say (KernelOpInterface, by the
// function's kiln.phase); this file maps each template to its emitter, one
// per kernel file, and walks a function once per kind of kernel it needs.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitTemplate(KernelTemplate t, Operation *op,
                                        const CodegenOptions &opts,
                                        Phase phase) {
  switch (t) {
  case KernelTemplate::embedding:
    return emitEmbedding(op, opts);
  case KernelTemplate::gemv:
    return emitGemv(op, opts);
  case KernelTemplate::qkv_gemv:
    return emitQkvGemv(op, opts);
  case KernelTemplate::linear_epilogue:
    return emitLinearEpilogue(op, opts, /*lastRow=*/false, phase);
  case KernelTemplate::qkv_epilogue:
    return emitQkvEpilogue(op, opts, phase);
  case KernelTemplate::prefill_attention:
    return emitPrefillAttention(op, opts);
  case KernelTemplate::decode_attention:
    return emitDecodeAttention(op, opts, phase == Phase::batch_decode);
  case KernelTemplate::none:
    break;
  }
  return llvm::createStringError(
      llvm::Twine("no CUDA template for '") + op->getName().getStringRef() +
      "' in " + stringifyPhase(phase) + " (run the fusion pipeline)");
}

namespace {

/// `emit` of each op of `fn` that `wanted` picks, once per kiln.kernel (the
/// first op of each, which names the kernel's provenance: kernelFor); an
/// error names the op's kernel.
llvm::Expected<std::vector<CudaKernel>> emitOncePerKernel(
    Operation *fn, llvm::function_ref<bool(KernelOpInterface)> wanted,
    llvm::function_ref<llvm::Expected<CudaKernel>(KernelOpInterface)> emit) {
  std::vector<CudaKernel> kernels;
  llvm::StringSet<> seen;
  std::optional<llvm::Error> error;
  fn->walk([&](KernelOpInterface op) {
    if (error || !wanted(op))
      return;
    auto kernel = op->getAttrOfType<StringAttr>("kiln.kernel");
    auto name = op->getAttrOfType<StringAttr>("kiln.name");
    if (!kernel || !name) {
      error = llvm::createStringError(
          llvm::Twine("'") + op->getName().getStringRef() +
          "' has no kiln.kernel and kiln.name: run the kiln pipeline first");
      return;
    }
    if (!seen.insert(kernel.getValue()).second)
      return; // identical layers share the kernel
    llvm::Expected<CudaKernel> k = emit(op);
    if (!k) {
      error = llvm::createStringError(
          llvm::Twine("kernel ") + kernel.getValue() + " (" + name.getValue() +
          ", '" + op->getName().getStringRef() +
          "'): " + toString(k.takeError()));
      return;
    }
    kernels.push_back(std::move(*k));
  });
  if (error)
    return std::move(*error);
  return kernels;
}

llvm::Expected<Phase> requirePhase(Operation *fn) {
  if (std::optional<Phase> phase = phaseOf(fn))
    return *phase;
  return llvm::createStringError(
      llvm::Twine("@") +
      (isa<func::FuncOp>(fn) ? cast<func::FuncOp>(fn).getName() : "?") +
      " has no kiln.phase, which says what it computes (the frontend marks "
      "@prefill and @decode)");
}

} // namespace

llvm::Expected<std::vector<CudaKernel>>
emitCudaKernels(Operation *fn, const CodegenOptions &opts) {
  auto phase = requirePhase(fn);
  if (!phase)
    return phase.takeError();
  return emitOncePerKernel(
      fn, [](KernelOpInterface) { return true; },
      [&](KernelOpInterface op) {
        return emitTemplate(op.getKernelTemplate(*phase), op, opts, *phase);
      });
}

llvm::Expected<std::vector<CudaKernel>>
emitSmallGemms(Operation *fn, const CodegenOptions &opts) {
  auto phase = requirePhase(fn);
  if (!phase)
    return phase.takeError();
  return emitOncePerKernel(
      fn,
      [&](KernelOpInterface op) {
        // A quantized weight's GEMM is its quantized one, in every plan.
        return followsGemm(op.getKernelTemplate(*phase)) &&
               !hasQuantizedWeight(op);
      },
      [&](KernelOpInterface op) { return emitSmallGemm(op, opts); });
}

/// `emit`'s kernel of each distinct matmul of `fn` of a quantized weight
/// whose epilogue follows a GEMM in its phase.
static llvm::Expected<std::vector<CudaKernel>> emitForQuantizedMatmuls(
    Operation *fn,
    llvm::function_ref<llvm::Expected<CudaKernel>(KernelOpInterface, Phase)>
        emit) {
  auto phase = requirePhase(fn);
  if (!phase)
    return phase.takeError();
  return emitOncePerKernel(
      fn,
      [&](KernelOpInterface op) {
        return hasQuantizedWeight(op) &&
               followsGemm(op.getKernelTemplate(*phase));
      },
      [&](KernelOpInterface op) { return emit(op, *phase); });
}

llvm::Expected<std::vector<CudaKernel>>
emitQuantGemms(Operation *fn, const CodegenOptions &opts) {
  return emitForQuantizedMatmuls(fn, [&](KernelOpInterface op, Phase phase) {
    return emitQuantGemm(op, opts, phase);
  });
}

llvm::Expected<std::vector<CudaKernel>>
emitDequantizeWeights(Operation *fn, const CodegenOptions &opts) {
  auto kernels = emitForQuantizedMatmuls(fn, [&](KernelOpInterface op, Phase) {
    return emitDequantizeWeight(op, opts);
  });
  if (!kernels)
    return kernels.takeError();
  // The FP8 GEMM's, for the fp8 weights.
  for (bool weight : {true, false}) {
    auto fp8 = emitForQuantizedMatmuls(
        fn, [&](KernelOpInterface op, Phase) -> llvm::Expected<CudaKernel> {
          if (quantGemmOf(op, QuantGemm::Fp8) != QuantGemm::Fp8)
            return CudaKernel{}; // not an fp8 weight: none
          return weight ? emitDequantizeWeight(op, opts, true)
                        : emitQuantizeActivation(op, opts);
        });
    if (!fp8)
      return fp8.takeError();
    for (CudaKernel &k : *fp8)
      if (!k.kernel.empty())
        kernels->push_back(std::move(k));
  }
  return kernels;
}

llvm::Expected<std::vector<CudaKernel>>
emitBatchKernels(Operation *prefill, const CodegenOptions &opts) {
  return emitOncePerKernel(
      prefill, [](KernelOpInterface op) { return hasBatchKernel(op); },
      [&](KernelOpInterface op) {
        return emitTemplate(op.getKernelTemplate(Phase::batch_decode), op, opts,
                            Phase::batch_decode);
      });
}

bool hasBatchKernel(KernelOpInterface op) {
  return op.getKernelTemplate(Phase::batch_decode) !=
         op.getKernelTemplate(Phase::prefill);
}

} // namespace kiln
