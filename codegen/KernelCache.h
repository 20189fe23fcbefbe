//===- KernelCache.h - compiled kernels on disk, by content -----*- C++ -*-===//
#ifndef KILN_CODEGEN_KERNELCACHE_H
#define KILN_CODEGEN_KERNELCACHE_H

#include "codegen/Nvrtc.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// Everything that decides what NVRTC produces: two compiles share a cache
/// entry exactly when all of it is equal.
struct CacheKey {
  std::string source, options, nvrtc, target, kiln;
  /// SHA-256 of the parts, hex: the entry's name.
  std::string digest() const;
};

CacheKey cacheKey(const KernelCode &kernel, const std::string &target);

/// A folder of entries named by key digest. Each entry is written under a
/// temporary name and renamed (several processes may fill one cache), and
/// carries a checksum of its contents: a damaged or truncated entry is
/// never used, but removed, recompiled and replaced.
class KernelCache {
public:
  explicit KernelCache(std::string dir) : dir_(std::move(dir)) {}
  /// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln/kernels, else
  /// ~/.cache/kiln/kernels.
  static std::string defaultDir();
  const std::string &dir() const { return dir_; }

  std::optional<CompiledKernel> load(const CacheKey &key);
  llvm::Error store(const CacheKey &key, const CompiledKernel &kernel);

  /// What an entry was compiled from, without its payload.
  struct Entry {
    std::string digest, kernel, target, nvrtc, kiln;
    std::string sourceSha, optionsSha;
    uint64_t bytes = 0;
    bool intact = false;
  };
  std::vector<Entry> list() const;
  /// The entry whose digest starts with `prefix` (one, or an error).
  llvm::Expected<Entry> find(const std::string &prefix) const;
  /// Removes every entry; returns how many.
  llvm::Expected<int> clear();
  /// Removes the temporary files of writers that died mid-write (their
  /// process is gone); returns how many. Every compile starts with it.
  int removeStaleTemporaries();

private:
  std::string path(const std::string &digest) const;
  std::string dir_;
};

/// Compiles every kernel for every target in parallel, taking what the
/// cache holds; `hits` counts the kernels that came from it.
llvm::Expected<std::vector<CompiledKernel>>
compileKernelsCached(const std::vector<KernelCode> &kernels,
                     const std::vector<std::string> &targets,
                     KernelCache &cache, int &hits);

} // namespace kiln

#endif // KILN_CODEGEN_KERNELCACHE_H
