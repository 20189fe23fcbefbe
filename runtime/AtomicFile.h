//===- AtomicFile.h - write a whole file or nothing -------------*- C++ -*-===//
#ifndef KILN_RUNTIME_ATOMICFILE_H
#define KILN_RUNTIME_ATOMICFILE_H

#include "absl/status/status.h"

#include <string>
#include <string_view>

namespace kiln {

/// Writes contents to a temporary file beside path and renames it over path,
/// so readers see the old file or the whole new one, and a failure (full
/// disk, a crash) leaves no partial output behind.
absl::Status writeFileAtomically(const std::string &path,
                                 std::string_view contents);

} // namespace kiln

#endif // KILN_RUNTIME_ATOMICFILE_H
