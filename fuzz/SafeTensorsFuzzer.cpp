//===- SafeTensorsFuzzer.cpp - the safetensors reader on any bytes --------===//
//
// Whatever the bytes, open() either refuses them with a status or returns
// tensors whose every byte lies inside the file: converting each one to
// float touches all of them (AddressSanitizer watches).
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzInput.h"
#include "runtime/SafeTensors.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = kiln::inputPath("safetensors");
  auto file = kiln::SafeTensorsFile::open(kiln::writeInput(path, data, size));
  if (!file.ok())
    return 0;
  for (const auto &[name, view] : (*file)->tensors()) {
    if (view.numElements() > (1 << 20))
      continue; // a large but valid tensor: nothing more to learn
    std::vector<float> out(view.numElements());
    view.toFloat(out.data());
  }
  return 0;
}
