//===- MappedFile.h - a whole file mapped read-only -------------*- C++ -*-===//
//
// What every reader of model files starts with (safetensors, GGUF,
// llama2.c): the file opened, checked to be a regular file, mapped whole
// and private, and unmapped when the mapping goes. Errors name the path.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_MAPPEDFILE_H
#define KILN_RUNTIME_MAPPEDFILE_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>

namespace kiln {

class MappedFile {
public:
  static absl::StatusOr<std::unique_ptr<MappedFile>>
  open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  /// [size()] bytes; null for an empty file.
  const uint8_t *data() const { return static_cast<const uint8_t *>(map_); }
  uint64_t size() const { return size_; }

private:
  MappedFile() = default;
  void *map_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace kiln

#endif // KILN_RUNTIME_MAPPEDFILE_H
