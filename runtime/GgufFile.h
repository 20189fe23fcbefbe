//===- GgufFile.h - a validating GGUF reader --------------------*- C++ -*-===//
//
// llama.cpp's model file (docs/gguf.md): "GGUF", a version (2 or 3), the
// tensor and metadata counts, the metadata (key, type, value), the tensor
// infos (name, dimensions, ggml type, offset), padding to the alignment,
// then the tensor data. All little-endian. The file is memory-mapped and
// every field is checked against it before use, with overflow-safe
// arithmetic: counts, string and array lengths, dimensions, type ids,
// offsets, alignment, tensors past the end or overlapping (llama.cpp's own
// loader has had heap overflows from each of these).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_GGUFFILE_H
#define KILN_RUNTIME_GGUFFILE_H

#include "runtime/GgmlBlocks.h"
#include "runtime/MappedFile.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// A metadata value's type id, as the file spells it.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char *ggufTypeName(GgufType t);

/// One metadata value: a scalar, a string, or an array of either (arrays
/// of arrays are refused). Numbers stay as bytes in the mapping and are
/// widened on access; strings are views into it.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elemType = GgufType::U8;      // arrays: their elements' type
  uint64_t count = 1;                    // arrays: elements; scalars: 1
  const uint8_t *raw = nullptr;          // numbers: the first element's bytes
  std::vector<std::string_view> strings; // strings: [count]

  bool isArray() const { return type == GgufType::Array; }
  /// The number type of the value or its elements.
  GgufType numberType() const { return isArray() ? elemType : type; }
  /// Element i of a number (i 0 for a scalar) as an integer: nullopt for a
  /// float type, a string or an index out of range.
  std::optional<int64_t> integer(uint64_t i = 0) const;
  /// Element i as a double: any number type (bool is 0 or 1).
  std::optional<double> number(uint64_t i = 0) const;
  /// A string scalar; nullopt otherwise.
  std::optional<std::string_view> string() const;
  /// "u32 4096", "string \"llama\"", "[f32 x 32000]": for `kiln inspect`.
  std::string describe() const;
};

/// One tensor's info, its data checked to lie inside the file.
struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> dims; // ne[0] first: ne[0] is the contiguous one
  uint64_t offset = 0;       // from the start of the data section
  const uint8_t *data = nullptr;
  uint64_t bytes = 0;

  int64_t elements() const;
  /// The row-major shape ([ne[1], ne[0]] for a matrix): safetensors' order.
  std::vector<int64_t> shape() const;
};

class GgufFile {
public:
  static absl::StatusOr<std::unique_ptr<GgufFile>>
  open(const std::string &path);
  /// True when the file at `path` starts with GGUF's magic.
  static bool looksLikeGguf(const std::string &path);
  ~GgufFile();
  GgufFile(const GgufFile &) = delete;
  GgufFile &operator=(const GgufFile &) = delete;

  const std::string &path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t dataOffset() const { return dataOffset_; }
  uint64_t fileBytes() const { return size_; }

  /// Keys in file order.
  const std::vector<std::pair<std::string, GgufValue>> &metadata() const {
    return metadata_;
  }
  const GgufValue *find(std::string_view key) const;
  /// Tensors in file order.
  const std::vector<GgufTensor> &tensors() const { return tensors_; }
  const GgufTensor *tensor(std::string_view name) const;

private:
  explicit GgufFile(std::string path) : path_(std::move(path)) {}
  absl::Status parse();

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  const void *map_ = nullptr; // mapping_'s bytes
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t dataOffset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> keyIndex_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensorIndex_;
};

} // namespace kiln

#endif // KILN_RUNTIME_GGUFFILE_H
