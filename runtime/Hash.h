//===- Hash.h - a stable 64-bit content hash --------------------*- C++ -*-===//
//
// FNV-1a: the same on every run and machine (unlike std::hash). For
// telling contents apart and noticing accidental damage (the emu cache's
// names, a bundle's checksum), not for security: the kernel cache, whose
// entries are shared between processes, keys on SHA-256.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_HASH_H
#define KILN_RUNTIME_HASH_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln {

class Fnv1a {
public:
  Fnv1a &add(std::string_view bytes) {
    for (unsigned char c : bytes)
      h_ = (h_ ^ c) * 1099511628211ull;
    return *this;
  }
  /// Sixteen hex digits.
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h_);
    return buf;
  }

private:
  uint64_t h_ = 1469598103934665603ull;
};

} // namespace kiln

#endif // KILN_RUNTIME_HASH_H
