//===- Nvrtc.cpp ----------------------------------------------------------===//
#include "codegen/Nvrtc.h"

#include "llvm/Support/Regex.h"

namespace kiln {

void readPtxasReport(CompiledKernel &k) {
  llvm::SmallVector<llvm::StringRef> m;
  if (llvm::Regex("Used ([0-9]+) registers").match(k.log, &m))
    m[1].getAsInteger(10, k.registers);
  if (llvm::Regex("([0-9]+) bytes smem").match(k.log, &m))
    m[1].getAsInteger(10, k.staticSharedBytes);
  if (llvm::Regex("([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
          .match(k.log, &m)) {
    m[1].getAsInteger(10, k.spillStores);
    m[2].getAsInteger(10, k.spillLoads);
  }
}

std::string nvrtcVersionString() {
  auto v = nvrtcVersion();
  return v.ok() ? *v : "(none)";
}

llvm::Expected<CompiledKernel> compileKernel(const KernelCode &kernel,
                                             const std::string &target) {
  auto compiled = nvrtcCompile(kernel, target);
  if (!compiled.ok())
    return llvm::createStringError(std::string(compiled.status().message()));
  CompiledKernel out;
  out.kernel = kernel.name;
  out.target = target;
  out.cubin = std::move(compiled->cubin);
  out.ptx = std::move(compiled->ptx);
  out.log = std::move(compiled->log);
  readPtxasReport(out);
  if (const int64_t most = maxSharedPerBlock(target);
      out.staticSharedBytes + kernel.dynamicSharedBytes > most)
    return llvm::createStringError(
        sharedMemoryFault(kernel, out.staticSharedBytes, target, most));
  return out;
}

} // namespace kiln
