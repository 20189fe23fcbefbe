//===- EmitCuda.cpp - every distinct kernel of a function -----------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {

llvm::Expected<std::vector<CudaKernel>>
emitCudaKernels(Operation *fn, const CodegenOptions &opts) {
  std::vector<CudaKernel> kernels;
  llvm::StringSet<> seen;
  std::optional<llvm::Error> error;
  fn->walk([&](Operation *op) {
    if (error || !isKernel(op))
      return;
    auto kernel = op->getAttrOfType<StringAttr>("kiln.kernel");
    auto name = op->getAttrOfType<StringAttr>("kiln.name");
    if (!kernel) {
      error = llvm::createStringError(
          llvm::Twine("'") + op->getName().getStringRef() +
          "' has no kiln.kernel name: run the kiln pipeline first");
      return;
    }
    if (!seen.insert(kernel.getValue()).second)
      return; // identical layers share the kernel
    // Prefill ops have a dynamic token count; decode's is 1.
    auto rows = dyn_cast<RankedTensorType>(op->getResultTypes()[0]);
    bool prefill = rows && rows.isDynamicDim(0);
    llvm::Expected<CudaKernel> k = llvm::createStringError("");
    if (isa<EmbeddingOp>(op))
      k = emitEmbedding(op, opts);
    else if (isa<FusedLinearOp, LinearOp, LogitsOp>(op))
      k = prefill ? emitLinearEpilogue(op, opts) : emitGemv(op, opts);
    else if (isa<FusedQKVOp>(op))
      k = prefill ? emitQkvEpilogue(op, opts) : emitQkvGemv(op, opts);
    else if (isa<AttentionOp>(op))
      k = prefill ? emitPrefillAttention(op, opts)
                  : emitDecodeAttention(op, opts);
    else
      k = llvm::createStringError(
          "no CUDA template for this op (run the fusion pipeline)");
    if (!k) {
      error = llvm::createStringError(
          llvm::Twine("kernel ") + kernel.getValue() + " (" +
          (name ? name.getValue() : "?") + ", '" +
          op->getName().getStringRef() + "'): " + toString(k.takeError()));
      return;
    }
    k->provenance = name ? name.str() : "";
    kernels.push_back(std::move(*k));
  });
  if (error)
    return std::move(*error);
  return kernels;
}

namespace {

/// `emit` of each op of `fn` that `wanted` picks, once per kiln.kernel (the
/// first op of each names the kernel's provenance).
llvm::Expected<std::vector<CudaKernel>> emitOncePerKernel(
    Operation *fn, llvm::function_ref<bool(Operation *)> wanted,
    llvm::function_ref<llvm::Expected<CudaKernel>(Operation *)> emit) {
  std::vector<CudaKernel> kernels;
  llvm::StringSet<> seen;
  std::optional<llvm::Error> error;
  fn->walk([&](Operation *op) {
    if (error || !wanted(op) ||
        !seen.insert(op->getAttrOfType<StringAttr>("kiln.kernel").getValue())
             .second)
      return;
    llvm::Expected<CudaKernel> k = emit(op);
    if (!k) {
      error = k.takeError();
      return;
    }
    k->provenance = op->getAttrOfType<StringAttr>("kiln.name").str();
    kernels.push_back(std::move(*k));
  });
  if (error)
    return std::move(*error);
  return kernels;
}

} // namespace

llvm::Expected<std::vector<CudaKernel>>
emitSmallGemms(Operation *prefill, const CodegenOptions &opts) {
  return emitOncePerKernel(
      prefill,
      [](Operation *op) {
        return isa<FusedLinearOp, LinearOp, LogitsOp, FusedQKVOp>(op);
      },
      [&](Operation *op) { return emitSmallGemm(op, opts); });
}

llvm::Expected<std::vector<CudaKernel>>
emitBatchAttention(Operation *prefill, const CodegenOptions &opts) {
  return emitOncePerKernel(
      prefill, [](Operation *op) { return isa<AttentionOp>(op); },
      [&](Operation *op) {
        return emitDecodeAttention(op, opts, /*batch=*/true);
      });
}

} // namespace kiln
