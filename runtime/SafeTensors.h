//===- SafeTensors.h - a validating safetensors reader and writer -*- C++
//-*-===//
//
// The file format (https://huggingface.co/docs/safetensors): 8 bytes of
// little-endian header length N, N bytes of JSON naming each tensor's dtype,
// shape and [begin, end) byte range inside the data section that follows.
// Files come from outside, so the reader checks every fact before any byte
// of data is touched.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SAFETENSORS_H
#define KILN_RUNTIME_SAFETENSORS_H

#include "runtime/DType.h"
#include "runtime/MappedFile.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// One tensor inside a mapped file.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t *data; // [numBytes] inside the mapping
  size_t numBytes;

  int64_t numElements() const;
  /// Converts the elements of a float tensor to float32 into out[numElements].
  void toFloat(float *out) const;
};

std::string shapeString(const std::vector<int64_t> &shape);

/// A memory-mapped, fully validated safetensors file.
class SafeTensorsFile {
public:
  static absl::StatusOr<std::unique_ptr<SafeTensorsFile>>
  open(const std::string &path);
  ~SafeTensorsFile();
  SafeTensorsFile(const SafeTensorsFile &) = delete;
  SafeTensorsFile &operator=(const SafeTensorsFile &) = delete;

  const std::string &path() const { return path_; }
  /// nullptr when the file has no tensor of that name.
  const TensorView *find(const std::string &name) const;
  const std::map<std::string, TensorView> &tensors() const { return tensors_; }
  /// The header's __metadata__: string keys to string values.
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

private:
  SafeTensorsFile(std::string path) : path_(std::move(path)) {}
  absl::Status parse();

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  const void *map_ = nullptr; // mapping_'s bytes
  uint64_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A tensor to write: data points at numElements * dtypeSize bytes.
struct OutTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void *data;
};

/// Writes a safetensors file atomically: to a temporary name in the same
/// folder, then renamed, so a failure never leaves a partial file at path.
absl::Status
writeSafeTensors(const std::string &path, const std::vector<OutTensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace kiln

#endif // KILN_RUNTIME_SAFETENSORS_H
