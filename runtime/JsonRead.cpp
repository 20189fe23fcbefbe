//===- JsonRead.cpp - reading JSON that comes from outside ----------------===//
#include "runtime/JsonRead.h"

namespace kiln {

std::string jsonErrorMessage(const std::exception &e) {
  // nlohmann's messages start with "[json.exception.parse_error.101] ".
  std::string m = e.what();
  if (auto p = m.find("] ");
      m.rfind("[json.exception", 0) == 0 && p != std::string::npos)
    m = m.substr(p + 2);
  std::string out;
  for (unsigned char c : m)
    if (c >= 0x20 && c < 0x7f)
      out += char(c);
    else
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
  return out;
}

void JsonFields::fail(const std::string &what) {
  if (status.ok())
    status = absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

int64_t JsonFields::positive(const char *key, int64_t fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) {
    if (fallback < 0)
      fail(absl::StrCat("missing field '", key, "'"));
    return fallback;
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > (int64_t(1) << 40)) {
    fail(absl::StrCat("field '", key, "' must be a positive integer, not ",
                      it->dump()));
    return 1;
  }
  return it->get<int64_t>();
}

double JsonFields::positiveReal(const char *key, double fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) {
    if (fallback < 0)
      fail(absl::StrCat("missing field '", key, "'"));
    return fallback;
  }
  if (!it->is_number() || !(it->get<double>() > 0)) {
    fail(absl::StrCat("field '", key, "' must be a positive number, not ",
                      it->dump()));
    return 1;
  }
  return it->get<double>();
}

std::string JsonFields::string(const char *key) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null())
    return "";
  if (!it->is_string()) {
    fail(absl::StrCat("field '", key, "' must be a string, not ", it->dump()));
    return "";
  }
  return it->get<std::string>();
}

bool JsonFields::boolean(const char *key, bool fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null())
    return fallback;
  if (!it->is_boolean()) {
    fail(absl::StrCat("field '", key, "' must be true or false, not ",
                      it->dump()));
    return fallback;
  }
  return it->get<bool>();
}

} // namespace kiln
