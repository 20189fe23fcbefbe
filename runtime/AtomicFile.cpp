//===- AtomicFile.cpp -----------------------------------------------------===//
#include "runtime/AtomicFile.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace kiln {

absl::Status writeFileAtomically(const std::string &path,
                                 std::string_view contents) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  const char *p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": write failed: ", std::strerror(err)));
    }
    p += n;
    left -= size_t(n);
  }
  if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot write: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

} // namespace kiln
