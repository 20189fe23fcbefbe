//===- EmuCompiler.cpp ----------------------------------------------------===//
#include "runtime/emu/EmuCompiler.h"
#include "runtime/AtomicFile.h"
#include "runtime/Hash.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace kiln {
namespace fs = std::filesystem;
namespace {

std::string env(const char *name, const std::string &fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hash(const std::string &text) { return Fnv1a().add(text).hex(); }

std::string cacheDir() {
  if (const char *dir = std::getenv("KILN_EMU_CACHE"); dir && *dir)
    return dir;
  std::string base = env("XDG_CACHE_HOME", env("HOME", "/tmp") + "/.cache");
  return base + "/kiln/emu";
}

/// The emulator's headers as the compiler sees them: `header` and the
/// headers beside it that it includes (tensor_core_emu.h), so that a change
/// to any of them makes new shared objects.
std::string headersText(const std::string &header) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto &e :
       fs::directory_iterator(fs::path(header).parent_path(), ec))
    if (e.path().extension() == ".h")
      paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  std::string text;
  for (const std::string &p : paths)
    text += fs::path(p).filename().string() + "\n" + readFile(p);
  return text;
}

/// The entry point that runs the grid, appended to the kernel's source,
/// its launches passing the kernel's dynamic shared memory as the
/// bundle recorded it.
std::string launcher(const KernelCode &k) {
  return "\nextern \"C\" void kiln_emu_launch(unsigned gx, unsigned gy, "
         "unsigned gz, unsigned block, void **args) {\n"
         "  kiln_emu::launch(dim3(gx, gy, gz), dim3(block), " +
         std::to_string(k.dynamicSharedBytes) + "u, [&] {\n" +
         "    kiln_emu::call(&" + k.entry + ", args);\n  });\n}\n";
}

/// Creates `path` holding `contents` unless it exists, never replacing it:
/// a precompiled header built against `path` stays valid (Clang checks its
/// inputs' time stamps) though other processes race to create it.
void createOnce(const std::string &path, const std::string &contents) {
  if (fs::exists(path))
    return;
  std::string tmp = absl::StrCat(path, ".", getpid());
  if (!writeFileAtomically(tmp, contents).ok())
    return;
  std::error_code ec;
  fs::create_hard_link(tmp, path, ec); // fails, harmlessly, if it exists
  fs::remove(tmp, ec);
}

/// The emulator's headers precompiled, once per compiler, flags and headers'
/// text: parsing them is half of a small kernel's compile. Copies of the
/// headers go into a folder of the cache with `<header>.gch` beside them,
/// which GCC and Clang both use for `-include <header>`. Returns the copy
/// of `header` to include, or "" if precompiling failed (the kernels then
/// include the header itself).
std::string precompiledHeader(const std::string &compile,
                              const std::string &header,
                              const std::string &headers) {
  std::string dir = cacheDir() + "/pch-" + hash(compile + "\n" + headers);
  std::string copy = dir + "/" + fs::path(header).filename().string();
  std::string gch = copy + ".gch";
  if (fs::exists(gch))
    return copy;
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const auto &e :
       fs::directory_iterator(fs::path(header).parent_path(), ec))
    if (e.path().extension() == ".h")
      createOnce(dir + "/" + e.path().filename().string(),
                 readFile(e.path().string()));
  std::string tmp = absl::StrCat(gch, ".", getpid());
  std::string cmd = absl::StrCat(compile, " -x c++-header '", copy, "' -o '",
                                 tmp, "' > /dev/null 2>&1");
  if (ec || std::system(cmd.c_str()) != 0) {
    fs::remove(tmp, ec);
    return "";
  }
  fs::rename(tmp, gch, ec); // atomic: concurrent runs race harmlessly
  return ec ? "" : copy;
}

/// How the kernels compile: `key` and `headers` (headersText's, read once
/// for all the kernels) are what name a shared object in the cache with its
/// source (the compiler, its flags, the header), `plain` compiles one with
/// the header itself, `command()` with the header precompiled, made by the
/// first kernel that is not in the cache (a run that finds them all
/// precompiles nothing).
class CompileCommand {
public:
  CompileCommand(std::string flags, std::string header)
      : key(including(flags, header)), plain(key), headers(headersText(header)),
        flags(std::move(flags)), header(std::move(header)) {}
  const std::string key, plain, headers;
  const std::string &command() {
    std::call_once(once, [&] {
      std::string copy = precompiledHeader(flags, header, headers);
      withPch = including(flags, copy.empty() ? header : copy);
      if (!copy.empty())
        gch = copy + ".gch";
    });
    return withPch;
  }
  /// The precompiled header command() uses, "" for none.
  const std::string &precompiled() {
    command();
    return gch;
  }

private:
  static std::string including(const std::string &flags, const std::string &h) {
    return absl::StrCat(flags, " -shared -x c++ -include '", h, "'");
  }
  const std::string flags, header;
  std::once_flag once;
  std::string withPch, gch;
};

absl::StatusOr<EmuLaunchFn> compileOne(const KernelCode &k,
                                       CompileCommand &compile) {
  std::string source = k.source + launcher(k);
  std::string key = hash(compile.key + "\n" + compile.headers + "\n" + source);
  std::string dir = cacheDir();
  std::string so = dir + "/" + k.entry + "-" + key + ".so";
  if (!fs::exists(so)) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::string tmp = absl::StrCat(so, ".", getpid());
    std::string cpp = tmp + ".cpp", log = tmp + ".log";
    if (absl::Status s = writeFileAtomically(cpp, source); !s.ok())
      return s;
    auto run = [&](const std::string &command) {
      std::string cmd = absl::StrCat(command, " '", cpp, "' -o '", tmp,
                                     "' -lboost_context > '", log, "' 2>&1");
      return std::system(cmd.c_str());
    };
    int rc = run(compile.command());
    // A precompiled header the compiler refuses (Clang's, after a system
    // header changed): without it, and rebuilt by the next run.
    if (rc != 0 && !compile.precompiled().empty() && run(compile.plain) == 0) {
      fs::remove(compile.precompiled(), ec);
      rc = 0;
    }
    std::string output = readFile(log);
    fs::remove(cpp, ec);
    fs::remove(log, ec);
    if (rc != 0) {
      fs::remove(tmp, ec);
      return absl::InternalError(absl::StrCat("emu: kernel ", k.name,
                                              ": the host compiler failed:\n",
                                              output.substr(0, 4000)));
    }
    fs::rename(tmp, so, ec); // atomic: concurrent runs race harmlessly
    if (ec)
      return absl::InternalError(
          absl::StrCat("emu: cannot store ", so, ": ", ec.message()));
  }
  void *handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return absl::InternalError(
        absl::StrCat("emu: kernel ", k.name, ": ", dlerror()));
  auto fn = reinterpret_cast<EmuLaunchFn>(dlsym(handle, "kiln_emu_launch"));
  if (!fn)
    return absl::InternalError(
        absl::StrCat("emu: kernel ", k.name, ": no kiln_emu_launch"));
  return fn;
}
} // namespace

absl::StatusOr<std::vector<EmuLaunchFn>>
compileEmuKernels(const std::vector<KernelCode> &kernels) {
  std::string header = env("KILN_EMU_HEADER", KILN_EMU_HEADER);
  // -fno-strict-aliasing: CUDA code reads vector loads through __half2
  // pointers, which nvcc allows and an optimizing host compiler would not.
#ifdef KILN_EMU_SANITIZE_CXX
  // The sanitized build checks the kernels' every access as well; their
  // reports go to the sanitizer runtime inside this executable. Of UBSan,
  // only the checks generated kernels can fail that nothing else catches
  // (alignment: a misaligned vector load faults on a GPU, not on x86): a
  // wrapped pointer, a null one, an object's size are only wrong where
  // dereferenced, which ASan or the crash reports, and return, vptr and
  // the like cannot occur. The rest of `undefined` added 38% to the
  // compiles, the sanitized tests' largest cost.
  std::string compiler = env("CXX", KILN_EMU_SANITIZE_CXX);
  std::string sanitize = " -fsanitize=address,alignment,array-bounds,shift,"
                         "signed-integer-overflow,integer-divide-by-zero,"
                         "float-cast-overflow,bool,enum "
                         "-fno-sanitize-recover=undefined "
                         "-fno-omit-frame-pointer";
#else
  std::string compiler = env("CXX", "c++"), sanitize;
#endif
  std::string flags = absl::StrCat(
      compiler, " -std=c++17 -O2 -fno-strict-aliasing -fPIC -w -I'",
      env("KILN_CUDA_INCLUDE", KILN_CUDA_INCLUDE_DIR), "'", sanitize, " ",
      env("KILN_EMU_CXXFLAGS", ""));
  CompileCommand compile(flags, header);
  std::vector<std::future<absl::StatusOr<EmuLaunchFn>>> jobs;
  for (const KernelCode &k : kernels)
    jobs.push_back(std::async(std::launch::async, compileOne, std::cref(k),
                              std::ref(compile)));
  std::vector<EmuLaunchFn> fns;
  for (auto &job : jobs) {
    auto fn = job.get();
    if (!fn.ok())
      return fn.status();
    fns.push_back(*fn);
  }
  return fns;
}

} // namespace kiln
