//===- EmuCompiler.h - generated CUDA C++ as host code ----------*- C++ -*-===//
#ifndef KILN_RUNTIME_EMU_EMUCOMPILER_H
#define KILN_RUNTIME_EMU_EMUCOMPILER_H

#include "runtime/Program.h"

#include "absl/status/statusor.h"

#include <string>
#include <vector>

namespace kiln {

/// Runs a compiled kernel's whole grid on the calling thread.
using EmuLaunchFn = void (*)(unsigned gx, unsigned gy, unsigned gz,
                             unsigned block, void **args);

/// Compiles each kernel's CUDA C++ with the host C++ compiler ($CXX, else
/// c++) against cuda_emu.h into a shared object, in parallel, and loads it.
/// Shared objects are cached by a hash of everything that goes into them
/// ($KILN_EMU_CACHE, else $XDG_CACHE_HOME/kiln/emu, else ~/.cache/kiln/emu),
/// so a second run compiles nothing.
absl::StatusOr<std::vector<EmuLaunchFn>>
compileEmuKernels(const std::vector<KernelCode> &kernels);

} // namespace kiln

#endif // KILN_RUNTIME_EMU_EMUCOMPILER_H
