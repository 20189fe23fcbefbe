//===- JsonRead.h - reading JSON that comes from outside --------*- C++ -*-===//
#ifndef KILN_RUNTIME_JSONREAD_H
#define KILN_RUNTIME_JSONREAD_H

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

} // namespace kiln

#endif // KILN_RUNTIME_JSONREAD_H
