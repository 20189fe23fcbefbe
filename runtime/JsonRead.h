//===- JsonRead.h - reading JSON that comes from outside --------*- C++ -*-===//
#ifndef KILN_RUNTIME_JSONREAD_H
#define KILN_RUNTIME_JSONREAD_H

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <concepts>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// A JSON parser's message, for one error line: without nlohmann's
/// "[json.exception...]" prefix, and with bytes that are not printable
/// ASCII (the parser quotes what it read: a damaged file's bytes) as \xNN.
std::string jsonErrorMessage(const std::exception &e);

/// The integer v holds, as T. nlohmann's get<T>() casts whatever number it
/// finds, and casting a float such as 1e300 (or a boolean) to an integer is
/// undefined behaviour or silently wrong; this throws std::invalid_argument
/// for anything but an integer that T can hold.
template <std::integral T> T jsonInteger(const nlohmann::json &v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (std::in_range<T>(u))
      return T(u);
  } else if (v.is_number_integer()) {
    auto i = v.get<int64_t>();
    if (std::in_range<T>(i))
      return T(i);
  }
  throw std::invalid_argument(absl::StrCat(
      "expected an integer of at most ", sizeof(T) * 8, " bits, found ",
      v.is_number() ? v.dump() : std::string(v.type_name())));
}

/// An array of integers, each read by jsonInteger.
template <std::integral T>
std::vector<T> jsonIntegers(const nlohmann::json &v) {
  if (!v.is_array())
    throw std::invalid_argument(
        absl::StrCat("expected an array of integers, found ", v.type_name()));
  std::vector<T> out;
  for (const nlohmann::json &e : v)
    out.push_back(jsonInteger<T>(e));
  return out;
}

/// The fields of a JSON object from a file, each read with its check; the
/// first fault is kept as `status` ("PATH: field 'r' must be a positive
/// integer, not -1"), the rest of the reading goes on with a fallback.
struct JsonFields {
  const nlohmann::json &json;
  const std::string &path;
  absl::Status status = absl::OkStatus();

  void fail(const std::string &what);
  /// A positive integer field; `fallback` < 0 means the field is required.
  int64_t positive(const char *key, int64_t fallback = -1);
  /// A positive number; `fallback` < 0 means the field is required.
  double positiveReal(const char *key, double fallback = -1);
  /// A string field; "" when absent or null.
  std::string string(const char *key);
  bool boolean(const char *key, bool fallback);
};

} // namespace kiln

#endif // KILN_RUNTIME_JSONREAD_H
