//===- Cache.cpp - kiln cache list | explain A B | clear ------------------===//
#include "codegen/KernelCache.h"
#include "tools/kiln/Commands.h"

#include "absl/strings/str_cat.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace kiln {
namespace {
cl::list<std::string> cacheArgs(cl::Positional, cl::desc("ACTION [ARGS]"),
                                cl::sub(cacheCommand()));

int usage() {
  return fail(absl::InvalidArgumentError(
                  "kiln cache: say list, explain DIGEST DIGEST, or clear"),
              2);
}
} // namespace

int runCache() {
  KernelCache cache(cacheDirFlag.empty() ? KernelCache::defaultDir()
                                         : std::string(cacheDirFlag));
  std::vector<std::string> args(cacheArgs.begin(), cacheArgs.end());
  if (args.empty())
    return usage();
  auto &os = llvm::outs();
  if (args[0] == "list" && args.size() == 1) {
    auto entries = cache.list();
    uint64_t bytes = 0;
    for (const auto &e : entries)
      bytes += e.bytes;
    os << entries.size() << " entries, " << bytes << " bytes in " << cache.dir()
       << "\n";
    for (const auto &e : entries)
      os << llvm::formatv("  {0}  {1,-40} {2,-6} nvrtc {3}  kiln {4}  {5} "
                          "bytes{6}\n",
                          e.digest.substr(0, 16), e.kernel, e.target, e.nvrtc,
                          e.kiln, e.bytes, e.intact ? "" : "  DAMAGED");
    return 0;
  }
  if (args[0] == "clear" && args.size() == 1) {
    auto n = cache.clear();
    if (!n)
      return fail(absl::InternalError(toString(n.takeError())));
    os << "removed " << *n << " entries from " << cache.dir() << "\n";
    return 0;
  }
  if (args[0] == "explain" && args.size() == 3) {
    auto a = cache.find(args[1]), b = cache.find(args[2]);
    if (!a)
      return fail(absl::InvalidArgumentError(toString(a.takeError())));
    if (!b)
      return fail(absl::InvalidArgumentError(toString(b.takeError())));
    // Which part of the key tells the two compiles apart.
    std::vector<std::tuple<const char *, std::string, std::string>> parts = {
        {"kernel source", a->sourceSha.substr(0, 16),
         b->sourceSha.substr(0, 16)},
        {"NVRTC options", a->optionsSha.substr(0, 16),
         b->optionsSha.substr(0, 16)},
        {"NVRTC version", a->nvrtc, b->nvrtc},
        {"target", a->target, b->target},
        {"kiln version", a->kiln, b->kiln}};
    os << a->digest.substr(0, 16) << " (" << a->kernel << ") and "
       << b->digest.substr(0, 16) << " (" << b->kernel << ")";
    int differ = 0;
    for (auto &[what, x, y] : parts)
      if (x != y) {
        os << (differ++ ? "; " : " differ in: ") << what << " (" << x << " vs "
           << y << ")";
      }
    os << (differ ? "\n" : " share every part of the key\n");
    return 0;
  }
  return usage();
}

} // namespace kiln
