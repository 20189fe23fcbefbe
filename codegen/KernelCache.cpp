//===- KernelCache.cpp ----------------------------------------------------===//
//
// An entry: the line "kiln-kernel-cache 1", a JSON line describing it (the
// key's parts, sizes, the payload's SHA-256), then the payload: CUBIN, PTX
// and the NVRTC log, back to back.
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelCache.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>

namespace kiln {
namespace {
constexpr llvm::StringLiteral kMagic = "kiln-kernel-cache 1\n";

std::string sha256(llvm::StringRef data) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(data)),
                     /*LowerCase=*/true);
}

std::string joined(const std::vector<std::string> &parts) {
  std::string s;
  for (const std::string &p : parts)
    s += p + "\n";
  return s;
}

/// Reads an entry's header; the payload follows at `payloadAt`.
std::optional<llvm::json::Object> readHeader(llvm::StringRef text,
                                             size_t &payloadAt) {
  if (!text.starts_with(kMagic))
    return std::nullopt;
  size_t end = text.find('\n', kMagic.size());
  if (end == llvm::StringRef::npos)
    return std::nullopt;
  auto json = llvm::json::parse(text.slice(kMagic.size(), end));
  if (!json || !json->getAsObject()) {
    llvm::consumeError(json ? llvm::Error::success() : json.takeError());
    return std::nullopt;
  }
  payloadAt = end + 1;
  return *json->getAsObject();
}
} // namespace

std::string CacheKey::digest() const {
  return sha256(joined({"source", source, "options", options, "nvrtc", nvrtc,
                        "target", target, "kiln", kiln}));
}

CacheKey cacheKey(const KernelCode &kernel, const std::string &target) {
  return {kernel.source, joined(nvrtcOptions(target)), nvrtcVersionString(),
          target, KILN_VERSION};
}

std::string KernelCache::defaultDir() {
  if (const char *dir = std::getenv("KILN_CACHE_DIR"); dir && *dir)
    return dir;
  const char *xdg = std::getenv("XDG_CACHE_HOME");
  const char *home = std::getenv("HOME");
  std::string base =
      xdg && *xdg ? xdg
                  : std::string(home && *home ? home : "/tmp") + "/.cache";
  return base + "/kiln/kernels";
}

std::string KernelCache::path(const std::string &digest) const {
  return dir_ + "/" + digest + ".kernel";
}

std::optional<CompiledKernel> KernelCache::load(const CacheKey &key) {
  std::string file = path(key.digest());
  auto buffer = llvm::MemoryBuffer::getFile(file);
  if (!buffer)
    return std::nullopt;
  llvm::StringRef text = (*buffer)->getBuffer();
  size_t at = 0;
  auto header = readHeader(text, at);
  llvm::StringRef payload = text.substr(at);
  auto size = [&](const char *k) { return header->getInteger(k).value_or(-1); };
  if (!header || size("cubin_bytes") < 0 || size("ptx_bytes") < 0 ||
      size("log_bytes") < 0 ||
      uint64_t(size("cubin_bytes") + size("ptx_bytes") + size("log_bytes")) !=
          payload.size() ||
      header->getString("payload_sha256").value_or("") != sha256(payload)) {
    llvm::sys::fs::remove(file); // damaged: recompile and replace
    return std::nullopt;
  }
  CompiledKernel k;
  k.kernel = header->getString("kernel").value_or("").str();
  k.target = key.target;
  k.cubin = payload.substr(0, size("cubin_bytes")).str();
  k.ptx = payload.substr(size("cubin_bytes"), size("ptx_bytes")).str();
  k.log = payload.substr(size("cubin_bytes") + size("ptx_bytes")).str();
  readPtxasReport(k);
  return k;
}

llvm::Error KernelCache::store(const CacheKey &key, const CompiledKernel &k) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir_))
    return llvm::createStringError(dir_ + ": " + ec.message());
  std::string payload = k.cubin + k.ptx + k.log;
  llvm::json::Object header{{"kernel", k.kernel},
                            {"target", key.target},
                            {"nvrtc", key.nvrtc},
                            {"kiln", key.kiln},
                            {"source_sha256", sha256(key.source)},
                            {"options_sha256", sha256(key.options)},
                            {"registers", k.registers},
                            {"spill_stores", k.spillStores},
                            {"spill_loads", k.spillLoads},
                            {"cubin_bytes", int64_t(k.cubin.size())},
                            {"ptx_bytes", int64_t(k.ptx.size())},
                            {"log_bytes", int64_t(k.log.size())},
                            {"payload_sha256", sha256(payload)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << kMagic << llvm::json::Value(std::move(header)) << "\n" << payload;
  std::string file = path(key.digest());
  std::string tmp = file + ".tmp." + std::to_string(getpid());
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(tmp, ec);
    if (ec)
      return llvm::createStringError(tmp + ": " + ec.message());
    out << text;
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, file)) {
    llvm::sys::fs::remove(tmp);
    return llvm::createStringError(file + ": " + ec.message());
  }
  return llvm::Error::success();
}

std::vector<KernelCache::Entry> KernelCache::list() const {
  std::vector<Entry> entries;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_back(".kernel"))
      continue;
    Entry e;
    e.digest = name.str();
    auto buffer = llvm::MemoryBuffer::getFile(it->path());
    if (buffer) {
      llvm::StringRef text = (*buffer)->getBuffer();
      e.bytes = text.size();
      size_t at = 0;
      if (auto h = readHeader(text, at)) {
        auto get = [&](const char *k) {
          return h->getString(k).value_or("?").str();
        };
        e.kernel = get("kernel");
        e.target = get("target");
        e.nvrtc = get("nvrtc");
        e.kiln = get("kiln");
        e.sourceSha = get("source_sha256");
        e.optionsSha = get("options_sha256");
        e.intact = get("payload_sha256") == sha256(text.substr(at));
      }
    }
    entries.push_back(std::move(e));
  }
  llvm::sort(entries, [](const Entry &a, const Entry &b) {
    return std::tie(a.kernel, a.target, a.digest) <
           std::tie(b.kernel, b.target, b.digest);
  });
  return entries;
}

llvm::Expected<KernelCache::Entry>
KernelCache::find(const std::string &prefix) const {
  std::vector<Entry> found;
  for (Entry &e : list())
    if (!prefix.empty() && llvm::StringRef(e.digest).starts_with(prefix))
      found.push_back(e);
  if (found.size() != 1)
    return llvm::createStringError(
        "'" + prefix + "': " +
        (found.empty() ? "no cache entry starts so"
                       : "several cache entries start so; give more digits"));
  return found.front();
}

int KernelCache::removeStaleTemporaries() {
  // "<digest>.kernel.tmp.<pid>": a write in progress, or the remains of a
  // process that died in one (SIGKILL, power loss).
  std::vector<std::string> stale;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    size_t at = name.find(".kernel.tmp.");
    int pid = 0;
    if (at == llvm::StringRef::npos ||
        name.substr(at + strlen(".kernel.tmp.")).getAsInteger(10, pid) ||
        pid <= 0)
      continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) // its writer is gone
      stale.push_back(it->path());
  }
  int removed = 0;
  for (const std::string &file : stale)
    removed += llvm::sys::fs::remove(file) ? 0 : 1;
  return removed;
}

llvm::Expected<int> KernelCache::clear() {
  removeStaleTemporaries();
  int n = 0;
  for (const Entry &e : list()) {
    if (std::error_code ec = llvm::sys::fs::remove(path(e.digest)))
      return llvm::createStringError(path(e.digest) + ": " + ec.message());
    ++n;
  }
  return n;
}

llvm::Expected<std::vector<CompiledKernel>>
compileKernelsCached(const std::vector<KernelCode> &kernels,
                     const std::vector<std::string> &targets,
                     KernelCache &cache, int &hits) {
  std::vector<std::pair<size_t, size_t>> jobs; // (kernel, target)
  for (size_t k = 0; k < kernels.size(); ++k)
    for (size_t t = 0; t < targets.size(); ++t)
      jobs.push_back({k, t});
  std::vector<std::optional<CompiledKernel>> done(jobs.size());
  std::mutex lock;
  cache.removeStaleTemporaries();
  std::string errors;
  hits = 0;
  llvm::parallelFor(0, jobs.size(), [&](size_t i) {
    const KernelCode &code = kernels[jobs[i].first];
    const std::string &target = targets[jobs[i].second];
    CacheKey key = cacheKey(code, target);
    if (auto cached = cache.load(key)) {
      cached->kernel = code.name;
      done[i] = std::move(*cached);
      std::lock_guard<std::mutex> guard(lock);
      ++hits;
      return;
    }
    auto compiled = compileKernel(code, target);
    std::lock_guard<std::mutex> guard(lock);
    if (!compiled) {
      errors += toString(compiled.takeError()) + "\n";
      return;
    }
    if (llvm::Error e = cache.store(key, *compiled)) // a cache that cannot
      llvm::consumeError(std::move(e));              // be written is skipped
    done[i] = std::move(*compiled);
  });
  if (!errors.empty()) {
    errors.pop_back();
    return llvm::createStringError(errors);
  }
  std::vector<CompiledKernel> out;
  for (auto &d : done)
    out.push_back(std::move(*d));
  return out;
}

} // namespace kiln
