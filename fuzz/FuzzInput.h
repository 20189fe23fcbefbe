//===- FuzzInput.h - a fuzzer's input as a file -----------------*- C++ -*-===//
//
// The readers kiln fuzzes take paths (they memory-map or read whole files),
// so each input is written to one file per process, overwritten each time.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FUZZ_FUZZINPUT_H
#define KILN_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace kiln {

/// Writes data to `path` (whole), returning it.
inline const std::string &writeInput(const std::string &path,
                                     const uint8_t *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f) {
    if (size)
      std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

/// A file name of this process for `what`.
inline std::string inputPath(const char *what) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/kiln-fuzz-" +
         std::to_string(getpid()) + "-" + what;
}

} // namespace kiln

#endif // KILN_FUZZ_FUZZINPUT_H
