//===- OpenLibrary.h - finding CUDA's shared libraries -----------*- C++
//-*-===//
//
// kiln opens libcuda, libcublas, libcublasLt and libnvrtc with dlopen. The
// dynamic linker's path finds them where the system registered them; a
// GPU machine's image often has the toolkit in /usr/local/cuda without
// that, so the toolkit's own lib64 folders are tried next ($CUDA_HOME,
// $CUDA_PATH, /usr/local/cuda, and the one kiln was built against).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CUDA_OPENLIBRARY_H
#define KILN_RUNTIME_CUDA_OPENLIBRARY_H

#include "absl/status/statusor.h"

#include <initializer_list>

namespace kiln {

/// The first of `sonames` that dlopen finds on its path, else (with
/// `inToolkit`: not the driver, which the toolkit does not hold) in a CUDA
/// toolkit's lib64; an error naming `what` and the first failure otherwise.
/// `prefix` begins the error ("cuda device", "NVRTC").
absl::StatusOr<void *>
openCudaLibrary(const char *prefix, const char *what,
                std::initializer_list<const char *> sonames, bool inToolkit);

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_OPENLIBRARY_H
