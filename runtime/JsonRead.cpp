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

} // namespace kiln
