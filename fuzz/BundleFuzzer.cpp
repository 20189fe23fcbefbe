//===- BundleFuzzer.cpp - the bundle reader on any bytes ------------------===//
//
// readBundle refuses damaged bundles with a status, never a crash; one it
// accepts has launches whose kernels, weights and regions exist.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzInput.h"
#include "runtime/Bundle.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = kiln::inputPath("bundle");
  auto bundle = kiln::readBundle(kiln::writeInput(path, data, size));
  if (!bundle.ok())
    return 0;
  const kiln::Program &p = bundle->program;
  for (const kiln::Launch &l : p.decode)
    if (l.kernel != kiln::kGemm &&
        (l.kernel < 0 || l.kernel >= int(p.kernels.size())))
      std::abort();
  return 0;
}
