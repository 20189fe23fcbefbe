//===- SafeTensors.cpp - validating safetensors reader and writer ---------===//
#include "runtime/SafeTensors.h"
#include "runtime/AtomicFile.h"
#include "runtime/GgmlBlocks.h"
#include "runtime/JsonRead.h"
#include "runtime/MappedFile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace kiln {
namespace {
// No real header comes near this; a larger claim is a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

absl::Status fault(const std::string &path, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

} // namespace

std::string shapeString(const std::vector<int64_t> &shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t TensorView::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

void TensorView::toFloat(float *out) const {
  int64_t n = numElements();
  if (isFloat(dtype))
    floatsToFloat(dtype, data, n, out);
  else if (isGgmlBlock(dtype)) // exactly as llama.cpp dequantizes them
    ggmlDequantize(*ggmlTypeOf(dtype), data, n, out);
  else
    std::fill(out, out + n, 0.0f); // callers check isFloat first
}

absl::StatusOr<std::unique_ptr<SafeTensorsFile>>
SafeTensorsFile::open(const std::string &path) {
  std::unique_ptr<SafeTensorsFile> file(new SafeTensorsFile(path));
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

SafeTensorsFile::~SafeTensorsFile() = default;

const TensorView *SafeTensorsFile::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::Status SafeTensorsFile::parse() {
  const auto *bytes = static_cast<const uint8_t *>(map_);
  if (size_ < 8)
    return fault(path_, absl::StrCat("file is ", size_,
                                     " bytes, too short for a safetensors "
                                     "header"));
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | bytes[i];
  if (headerLen > kMaxHeaderBytes || headerLen > size_ - 8)
    return fault(path_, absl::StrCat("header length ", headerLen,
                                     " runs past the end of the file (", size_,
                                     " bytes)"));
  const char *headerBegin = reinterpret_cast<const char *>(bytes + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(headerBegin, headerBegin + headerLen);
  } catch (const std::exception &e) {
    return fault(path_, "header is not valid JSON: " + jsonErrorMessage(e));
  }
  if (!header.is_object())
    return fault(path_, "header is not a JSON object");

  const uint8_t *dataBegin = bytes + 8 + headerLen;
  const uint64_t dataSize = size_ - 8 - headerLen;
  struct Range {
    uint64_t begin, end;
    const std::string *name;
  };
  std::vector<Range> ranges;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return fault(path_, "__metadata__ is not a JSON object");
      for (auto &[key, value] : entry.items()) {
        if (!value.is_string())
          return fault(path_, absl::StrCat("__metadata__ entry '", key,
                                           "' is not a string"));
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    std::string where = absl::StrCat("tensor '", name, "'");
    if (!entry.is_object())
      return fault(path_, where + " is not a JSON object");
    auto dtypeIt = entry.find("dtype");
    auto shapeIt = entry.find("shape");
    auto offsetsIt = entry.find("data_offsets");
    if (dtypeIt == entry.end() || shapeIt == entry.end() ||
        offsetsIt == entry.end())
      return fault(path_, where + " lacks dtype, shape or data_offsets");
    if (!dtypeIt->is_string())
      return fault(path_, where + ": dtype is not a string");
    std::optional<DType> dtype = parseDType(dtypeIt->get<std::string>());
    if (!dtype)
      return fault(path_, absl::StrCat(where, ": unsupported dtype '",
                                       dtypeIt->get<std::string>(),
                                       "' (kiln reads F32, F16, BF16, I32, "
                                       "I64, U8)"));
    if (!shapeIt->is_array())
      return fault(path_, where + ": shape is not an array");
    std::vector<int64_t> shape;
    // Saturates at 2^64 so that a crafted shape cannot wrap the byte count.
    using u128 = unsigned __int128;
    constexpr u128 kTooBig = u128(1) << 64;
    u128 bytesNeeded = dtypeSize(*dtype);
    for (auto &d : *shapeIt) {
      if (!d.is_number_unsigned())
        return fault(path_, where + ": shape holds a value that is not a "
                                    "non-negative integer");
      uint64_t dim = d.get<uint64_t>();
      bytesNeeded = bytesNeeded * std::min<uint64_t>(dim, uint64_t(1) << 63);
      bytesNeeded = std::min(bytesNeeded, kTooBig);
      shape.push_back(int64_t(std::min<uint64_t>(dim, INT64_MAX)));
    }
    if (!offsetsIt->is_array() || offsetsIt->size() != 2 ||
        !(*offsetsIt)[0].is_number_unsigned() ||
        !(*offsetsIt)[1].is_number_unsigned())
      return fault(path_, where + ": data_offsets is not a pair of "
                                  "non-negative integers");
    uint64_t begin = (*offsetsIt)[0].get<uint64_t>();
    uint64_t end = (*offsetsIt)[1].get<uint64_t>();
    if (begin > end)
      return fault(path_, absl::StrCat(where, ": data_offsets [", begin, ", ",
                                       end, ") run backwards"));
    if (end > dataSize)
      return fault(path_, absl::StrCat(where, ": byte range [", begin, ", ",
                                       end, ") lies outside the data section (",
                                       dataSize, " bytes)"));
    if (bytesNeeded != end - begin)
      return fault(path_,
                   absl::StrCat(where, ": shape ", shapeString(shape), " of ",
                                dtypeName(*dtype), " needs ",
                                bytesNeeded >= kTooBig
                                    ? std::string("over 2^64")
                                    : std::to_string(uint64_t(bytesNeeded)),
                                " bytes, data_offsets give ", end - begin));
    auto [it, inserted] = tensors_.emplace(
        name, TensorView{name, *dtype, shape, dataBegin + begin,
                         size_t(end - begin)});
    ranges.push_back({begin, end, &it->first});
  }
  // No two tensors may share bytes: a writer bug or a crafted file would
  // otherwise make one weight silently alias another.
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      return fault(path_, absl::StrCat("tensors '", *ranges[i - 1].name,
                                       "' and '", *ranges[i].name,
                                       "' overlap in the data section"));
  return absl::OkStatus();
}

absl::Status
writeSafeTensors(const std::string &path, const std::vector<OutTensor> &tensors,
                 const std::map<std::string, std::string> &metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const OutTensor &t : tensors) {
    uint64_t n = dtypeSize(t.dtype);
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    header[t.name] = {{"dtype", std::string(dtypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' '); // keep the data 8-aligned
  std::string out(8, '\0');
  uint64_t len = json.size();
  for (int i = 0; i < 8; ++i)
    out[i] = char((len >> (8 * i)) & 0xff);
  out += json;
  for (const OutTensor &t : tensors) {
    uint64_t n = dtypeSize(t.dtype);
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    out.append(static_cast<const char *>(t.data), n);
  }
  return writeFileAtomically(path, out);
}

} // namespace kiln
