//===- Isolated.h - running a piece of work in a child process --*- C++ -*-===//
//
// A CUDA fault such as an illegal address is sticky: it breaks the process's
// context for good, and cuBLAS holds the primary context too, so nothing
// after it in the same process can run. Work that may fault (timing a tuning
// candidate's bundle) runs in a forked child; what it returns comes back
// through a pipe, and a child that dies (a signal, an abort, a sanitizer's
// report) becomes an error naming how it died. The parent must not have
// touched the GPU before forking (CUDA is not fork-safe once initialized):
// everything that does runs in a child.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_ISOLATED_H
#define KILN_RUNTIME_ISOLATED_H

#include "absl/status/statusor.h"

#include <functional>
#include <string>

namespace kiln {

/// Runs `work` in a child process and returns what it returned (bytes, or
/// its error), or an error saying how the child died.
absl::StatusOr<std::string>
runIsolated(const std::function<absl::StatusOr<std::string>()> &work);

} // namespace kiln

#endif // KILN_RUNTIME_ISOLATED_H
