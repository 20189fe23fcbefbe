//===- GgufFile.cpp - validating GGUF reader ------------------------------===//
#include "runtime/GgufFile.h"
#include "runtime/MappedFile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace kiln {
namespace {
constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kMaxDims = 4; // GGML_MAX_DIMS

absl::Status fault(const std::string &path, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

/// Bytes of one number of type t; 0 for strings and arrays.
uint64_t numberBytes(GgufType t) {
  switch (t) {
  case GgufType::U8:
  case GgufType::I8:
  case GgufType::Bool:
    return 1;
  case GgufType::U16:
  case GgufType::I16:
    return 2;
  case GgufType::U32:
  case GgufType::I32:
  case GgufType::F32:
    return 4;
  case GgufType::U64:
  case GgufType::I64:
  case GgufType::F64:
    return 8;
  case GgufType::String:
  case GgufType::Array:
    return 0;
  }
  return 0;
}

/// Reads little-endian fields of the mapping, never past its end.
class Cursor {
public:
  Cursor(const uint8_t *base, uint64_t size) : base_(base), size_(size) {}
  uint64_t at() const { return at_; }
  uint64_t left() const { return size_ - at_; }
  /// n bytes, or null when fewer are left.
  const uint8_t *take(uint64_t n) {
    if (n > left())
      return nullptr;
    const uint8_t *p = base_ + at_;
    at_ += n;
    return p;
  }
  bool u32(uint32_t &v) { return read(v); }
  bool u64(uint64_t &v) { return read(v); }

private:
  template <typename T> bool read(T &v) {
    const uint8_t *p = take(sizeof(T));
    if (p)
      std::memcpy(&v, p, sizeof(T)); // the hosts kiln runs on are LE
    return p != nullptr;
  }
  const uint8_t *base_;
  uint64_t size_, at_ = 0;
};

bool knownType(uint32_t t) { return t <= uint32_t(GgufType::F64); }

template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
} // namespace

const char *ggufTypeName(GgufType t) {
  switch (t) {
  case GgufType::U8:
    return "u8";
  case GgufType::I8:
    return "i8";
  case GgufType::U16:
    return "u16";
  case GgufType::I16:
    return "i16";
  case GgufType::U32:
    return "u32";
  case GgufType::I32:
    return "i32";
  case GgufType::F32:
    return "f32";
  case GgufType::Bool:
    return "bool";
  case GgufType::String:
    return "string";
  case GgufType::Array:
    return "array";
  case GgufType::U64:
    return "u64";
  case GgufType::I64:
    return "i64";
  case GgufType::F64:
    return "f64";
  }
  return "?";
}

std::optional<int64_t> GgufValue::integer(uint64_t i) const {
  if (i >= count || !raw)
    return std::nullopt;
  const GgufType t = numberType();
  const uint8_t *p = raw + i * numberBytes(t);
  switch (t) {
  case GgufType::U8:
  case GgufType::Bool:
    return load<uint8_t>(p);
  case GgufType::I8:
    return load<int8_t>(p);
  case GgufType::U16:
    return load<uint16_t>(p);
  case GgufType::I16:
    return load<int16_t>(p);
  case GgufType::U32:
    return load<uint32_t>(p);
  case GgufType::I32:
    return load<int32_t>(p);
  case GgufType::U64: {
    uint64_t v = load<uint64_t>(p);
    if (v > uint64_t(INT64_MAX))
      return std::nullopt;
    return int64_t(v);
  }
  case GgufType::I64:
    return load<int64_t>(p);
  default:
    return std::nullopt;
  }
}

std::optional<double> GgufValue::number(uint64_t i) const {
  if (i >= count || !raw)
    return std::nullopt;
  const GgufType t = numberType();
  const uint8_t *p = raw + i * numberBytes(t);
  switch (t) {
  case GgufType::F32:
    return load<float>(p);
  case GgufType::F64:
    return load<double>(p);
  case GgufType::U64:
    return double(load<uint64_t>(p));
  default:
    if (auto v = integer(i))
      return double(*v);
    return std::nullopt;
  }
}

std::optional<std::string_view> GgufValue::string() const {
  if (type != GgufType::String || strings.empty())
    return std::nullopt;
  return strings[0];
}

std::string GgufValue::describe() const {
  auto one = [&](uint64_t i) -> std::string {
    GgufType t = numberType();
    if (t == GgufType::String) {
      std::string s(strings[i].substr(0, 60));
      for (char &c : s)
        if (uint8_t(c) < 0x20)
          c = ' ';
      return absl::StrCat("\"", s, strings[i].size() > 60 ? "...\"" : "\"");
    }
    if (t == GgufType::Bool)
      return *integer(i) ? "true" : "false";
    if (t == GgufType::F32 || t == GgufType::F64)
      return absl::StrCat(*number(i));
    if (t == GgufType::U64 && !integer(i))
      return absl::StrCat(load<uint64_t>(raw + 8 * i));
    return absl::StrCat(*integer(i));
  };
  if (!isArray())
    return absl::StrCat(ggufTypeName(type), " ", one(0));
  std::string out =
      absl::StrCat("[", ggufTypeName(elemType), " x ", count, "]");
  if (count) {
    std::vector<std::string> first;
    for (uint64_t i = 0; i < std::min<uint64_t>(count, 4); ++i)
      first.push_back(one(i));
    absl::StrAppend(&out, " ", absl::StrJoin(first, ", "),
                    count > 4 ? ", ..." : "");
  }
  return out;
}

int64_t GgufTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d; // checked against overflow when read
  return n;
}

std::vector<int64_t> GgufTensor::shape() const {
  return std::vector<int64_t>(dims.rbegin(), dims.rend());
}

bool GgufFile::looksLikeGguf(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  uint8_t head[4] = {};
  bool yes = ::read(fd, head, 4) == 4 && std::memcmp(head, kMagic, 4) == 0;
  ::close(fd);
  return yes;
}

absl::StatusOr<std::unique_ptr<GgufFile>>
GgufFile::open(const std::string &path) {
  std::unique_ptr<GgufFile> file(new GgufFile(path));
  auto mapped = MappedFile::open(path);
  if (!mapped.ok())
    return mapped.status();
  file->mapping_ = std::move(*mapped);
  file->map_ = file->mapping_->data();
  file->size_ = file->mapping_->size();
  if (absl::Status s = file->parse(); !s.ok())
    return s;
  return file;
}

GgufFile::~GgufFile() = default;

const GgufValue *GgufFile::find(std::string_view key) const {
  auto it = keyIndex_.find(key);
  return it == keyIndex_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor *GgufFile::tensor(std::string_view name) const {
  auto it = tensorIndex_.find(name);
  return it == tensorIndex_.end() ? nullptr : &tensors_[it->second];
}

absl::Status GgufFile::parse() {
  const auto *bytes = static_cast<const uint8_t *>(map_);
  Cursor in(bytes, size_);
  const uint8_t *magic = in.take(4);
  if (!magic || std::memcmp(magic, kMagic, 4) != 0)
    return fault(path_, "not a GGUF file (no 'GGUF' magic)");
  if (!in.u32(version_))
    return fault(path_, "truncated: the file ends inside the header");
  if (version_ == 1)
    return fault(path_, "GGUF version 1 is not supported (32-bit counts): "
                        "convert the file again with a current llama.cpp");
  if (version_ != 2 && version_ != 3) {
    uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3)
      return fault(path_, "a big-endian GGUF file: kiln reads little-endian "
                          "GGUF only");
    return fault(path_, absl::StrCat("GGUF version ", version_,
                                     " is not supported (versions 2 and 3 "
                                     "are)"));
  }
  uint64_t tensorCount = 0, kvCount = 0;
  if (!in.u64(tensorCount) || !in.u64(kvCount))
    return fault(path_, "truncated: the file ends inside the header");
  // Each metadata entry takes at least 13 bytes (key length, type, a u8)
  // and each tensor info 24 (name length, dims count, type, offset): a
  // count the file cannot hold is a corrupt field, refused before any
  // allocation it would size.
  if (kvCount > in.left() / 13)
    return fault(path_, absl::StrCat("metadata count ", kvCount,
                                     " is more than the file's ", size_,
                                     " bytes can hold"));
  if (tensorCount > in.left() / 24)
    return fault(path_, absl::StrCat("tensor count ", tensorCount,
                                     " is more than the file's ", size_,
                                     " bytes can hold"));

  auto readString = [&](std::string_view &out,
                        const std::string &what) -> absl::Status {
    uint64_t n = 0;
    if (!in.u64(n))
      return fault(path_, absl::StrCat("truncated: the file ends inside ", what,
                                       "'s length"));
    const uint8_t *p = in.take(n);
    if (!p)
      return fault(path_, absl::StrCat(what, ": string length ", n,
                                       " runs past the end of the file"));
    out = std::string_view(reinterpret_cast<const char *>(p), n);
    return absl::OkStatus();
  };

  for (uint64_t k = 0; k < kvCount; ++k) {
    std::string_view key;
    if (absl::Status s = readString(key, absl::StrCat("metadata key #", k));
        !s.ok())
      return s;
    std::string where = absl::StrCat("metadata '", std::string(key), "'");
    if (keyIndex_.count(key))
      return fault(path_, absl::StrCat(where, " appears twice"));
    GgufValue v;
    uint32_t type = 0;
    if (!in.u32(type))
      return fault(path_,
                   absl::StrCat("truncated: the file ends inside ", where));
    if (!knownType(type))
      return fault(path_, absl::StrCat(where, ": value type id ", type,
                                       " is out of range (0..12)"));
    v.type = GgufType(type);
    GgufType elem = v.type;
    if (v.type == GgufType::Array) {
      uint32_t et = 0;
      if (!in.u32(et) || !in.u64(v.count))
        return fault(path_,
                     absl::StrCat("truncated: the file ends inside ", where));
      if (!knownType(et))
        return fault(path_, absl::StrCat(where, ": array element type id ", et,
                                         " is out of range (0..12)"));
      v.elemType = elem = GgufType(et);
      if (elem == GgufType::Array)
        return fault(path_, absl::StrCat(where, ": arrays of arrays are "
                                                "not supported"));
    }
    if (elem == GgufType::String) {
      // A string takes at least its 8-byte length.
      if (v.count > in.left() / 8)
        return fault(path_, absl::StrCat(where, ": ", v.count,
                                         " strings run past the end of the "
                                         "file"));
      // Pushed as read: memory follows the strings the file really holds,
      // not a count it claims.
      for (uint64_t i = 0; i < v.count; ++i) {
        std::string_view text;
        if (absl::Status s = readString(
                text,
                v.isArray() ? absl::StrCat(where, " element ", i) : where);
            !s.ok())
          return s;
        v.strings.push_back(text);
      }
    } else {
      uint64_t size = numberBytes(elem);
      if (v.count > in.left() / size)
        return fault(path_,
                     absl::StrCat(where, ": ", v.count, " ", ggufTypeName(elem),
                                  " values run past the end of the "
                                  "file"));
      v.raw = in.take(v.count * size);
    }
    keyIndex_.emplace(std::string(key), metadata_.size());
    metadata_.emplace_back(std::string(key), std::move(v));
  }

  if (const GgufValue *a = find("general.alignment")) {
    auto value =
        a->isArray() || a->type != GgufType::U32 ? std::nullopt : a->integer();
    if (!value || *value < 8 || (*value & (*value - 1)) != 0)
      return fault(path_, absl::StrCat("general.alignment (", a->describe(),
                                       ") is not a u32 power of two of at "
                                       "least 8"));
    alignment_ = uint64_t(*value);
  }

  for (uint64_t i = 0; i < tensorCount; ++i) {
    GgufTensor t;
    std::string_view name;
    if (absl::Status s = readString(name, absl::StrCat("tensor #", i, " name"));
        !s.ok())
      return s;
    t.name = std::string(name);
    std::string where = absl::StrCat("tensor '", t.name, "'");
    if (tensorIndex_.count(t.name))
      return fault(path_, absl::StrCat(where, " appears twice"));
    uint32_t nDims = 0;
    if (!in.u32(nDims))
      return fault(path_,
                   absl::StrCat("truncated: the file ends inside ", where));
    if (nDims == 0 || nDims > kMaxDims)
      return fault(path_, absl::StrCat(where, ": ", nDims,
                                       " dimensions (1 to 4 allowed)"));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < nDims; ++d) {
      uint64_t ne = 0;
      if (!in.u64(ne))
        return fault(path_,
                     absl::StrCat("truncated: the file ends inside ", where));
      if (ne == 0 || ne > uint64_t(INT64_MAX) ||
          __builtin_mul_overflow(elements, ne, &elements) ||
          elements > uint64_t(INT64_MAX))
        return fault(path_, absl::StrCat(where, ": dimension ", d, " (", ne,
                                         ") is zero or overflows the "
                                         "element count"));
      t.dims.push_back(int64_t(ne));
    }
    uint32_t type = 0;
    if (!in.u32(type) || !in.u64(t.offset))
      return fault(path_,
                   absl::StrCat("truncated: the file ends inside ", where));
    auto info = ggmlTypeInfo(type);
    if (!info)
      return fault(path_, absl::StrCat(where, ": type id ", type,
                                       " is not a ggml type"));
    t.type = GgmlType(type);
    if (t.dims[0] % info->blockElements)
      return fault(path_, absl::StrCat(where, ": its rows of ", t.dims[0],
                                       " values are not whole ", info->name,
                                       " blocks of ", info->blockElements));
    auto nbytes = ggmlBytes(t.type, int64_t(elements));
    if (!nbytes)
      return fault(path_, absl::StrCat(where, ": its byte size overflows"));
    t.bytes = *nbytes;
    if (t.offset % alignment_)
      return fault(path_, absl::StrCat(where, ": offset ", t.offset,
                                       " is not a multiple of the alignment "
                                       "(",
                                       alignment_, ")"));
    tensorIndex_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  uint64_t end = in.at();
  uint64_t pad = (alignment_ - end % alignment_) % alignment_;
  if (__builtin_add_overflow(end, pad, &dataOffset_) || dataOffset_ > size_) {
    if (tensors_.empty()) {
      dataOffset_ = size_;
      return absl::OkStatus();
    }
    return fault(path_, "truncated: the file ends before its data section");
  }
  const uint64_t dataBytes = size_ - dataOffset_;
  std::vector<const GgufTensor *> byOffset;
  for (GgufTensor &t : tensors_) {
    uint64_t last;
    if (__builtin_add_overflow(t.offset, t.bytes, &last) || last > dataBytes)
      return fault(path_, absl::StrCat("tensor '", t.name, "' (", t.bytes,
                                       " bytes at data offset ", t.offset,
                                       ") runs past the end of the file"));
    t.data = bytes + dataOffset_ + t.offset;
    byOffset.push_back(&t);
  }
  std::sort(byOffset.begin(), byOffset.end(),
            [](const GgufTensor *a, const GgufTensor *b) {
              return a->offset < b->offset;
            });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i - 1]->offset + byOffset[i - 1]->bytes > byOffset[i]->offset)
      return fault(path_,
                   absl::StrCat("tensors '", byOffset[i - 1]->name, "' and '",
                                byOffset[i]->name, "' overlap"));
  return absl::OkStatus();
}

} // namespace kiln
