//===- KernelCacheFuzzer.cpp - kernel cache entries of any bytes ----------===//
//
// A cache entry comes from disk, where another process, a crash or a flipped
// bit may have left anything: load() returns a kernel only when the entry
// is whole and its checksum matches, and nothing else happens.
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelCache.h"
#include "fuzz/FuzzInput.h"

#include "llvm/Support/FileSystem.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string dir = kiln::inputPath("cache");
  static const kiln::CacheKey key = [] {
    llvm::sys::fs::create_directories(dir);
    return kiln::cacheKey({"k", "kiln_k", "extern \"C\" __global__ void "
                                          "kiln_k() {}",
                           "", 0},
                          "sm_90");
  }();
  kiln::writeInput(dir + "/" + key.digest() + ".kernel", data, size);
  kiln::KernelCache cache(dir);
  (void)cache.load(key);
  (void)cache.list();
  return 0;
}
