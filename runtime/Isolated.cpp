//===- Isolated.cpp -------------------------------------------------------===//
#include "runtime/Isolated.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln {
namespace {
// The child's answer on the pipe: a status code (4 bytes; 0 is OK), then
// the payload (OK) or the message (an error), to the end.
bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}
} // namespace

absl::StatusOr<std::string>
runIsolated(const std::function<absl::StatusOr<std::string>()> &work) {
  int fds[2];
  if (::pipe(fds) != 0)
    return absl::InternalError(
        absl::StrCat("cannot make a pipe for a child: ", std::strerror(errno)));
  // What the parent has buffered must not be written twice.
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(
        absl::StrCat("cannot start a child: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    absl::StatusOr<std::string> r = work();
    int32_t code = int32_t(r.status().code());
    const std::string &body = r.ok() ? *r : std::string(r.status().message());
    bool sent = writeAll(fds[1], reinterpret_cast<const char *>(&code), 4) &&
                writeAll(fds[1], body.data(), body.size());
    std::fflush(stdout);
    std::fflush(stderr);
    // No atexit handlers, no destructors of the parent's statics.
    ::_exit(sent ? 0 : 3);
  }
  ::close(fds[1]);
  std::string answer;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    answer.append(buffer, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return absl::AbortedError(absl::StrCat("its process died of signal ",
                                           WTERMSIG(status), " (",
                                           strsignal(WTERMSIG(status)), ")"));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || answer.size() < 4)
    return absl::AbortedError(absl::StrCat(
        "its process exited with status ",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1, " before answering"));
  int32_t code = 0;
  std::memcpy(&code, answer.data(), 4);
  if (code != 0)
    return absl::Status(code > 0 && code <= 16 ? absl::StatusCode(code)
                                               : absl::StatusCode::kUnknown,
                        answer.substr(4));
  return answer.substr(4);
}

} // namespace kiln
