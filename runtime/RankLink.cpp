//===- RankLink.cpp -------------------------------------------------------===//
#include "runtime/RankLink.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include <cerrno>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

struct Header {
  uint32_t kind, zero;
  uint64_t bytes;
};
static_assert(sizeof(Header) == 16);

// A frame larger than this is a fault, not a message (a prefill's
// all-reduce of a 70B model's 8192 columns over 4096 rows is 64 MiB).
constexpr uint64_t kMaxFrameBytes = uint64_t(1) << 32;

std::string errnoText() { return std::strerror(errno); }

/// Waits until `fd` is readable (true), the deadline passes or *stop is
/// set (false).
bool waitReadable(int fd, std::optional<Clock::time_point> deadline,
                  const std::atomic<bool> *stop) {
  for (;;) {
    if (stop && stop->load())
      return false;
    int wait = 50;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      *deadline - Clock::now())
                      .count();
      if (left <= 0)
        return false;
      wait = int(std::min<int64_t>(wait, left));
    }
    pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, stop || deadline ? wait : -1);
    if (r > 0)
      return true;
    if (r < 0 && errno != EINTR)
      return true; // the read says what is wrong
  }
}

std::string rankName(int peer) { return absl::StrCat("rank ", peer); }

/// host:port split; the port a number.
absl::StatusOr<std::pair<std::string, std::string>>
splitAddress(const std::string &address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 ||
      port > 65535)
    return absl::InvalidArgumentError(absl::StrCat(
        "--rendezvous: '", address, "' is not HOST:PORT (a port 1-65535)"));
  return std::make_pair(address.substr(0, colon), address.substr(colon + 1));
}

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// The hello a rank sends on each of its two connections.
std::string hello(const RendezvousOptions &o, int channel) {
  return absl::StrCat("kiln-rank ", o.rank, " ", o.worldSize, " ", channel, " ",
                      o.digest);
}

struct Hello {
  int rank = -1, world = 0, channel = -1;
  std::string digest;
};

std::optional<Hello> parseHello(const std::string &text) {
  std::vector<std::string> f = absl::StrSplit(text, ' ');
  Hello h;
  if (f.size() != 5 || f[0] != "kiln-rank" ||
      !absl::SimpleAtoi(f[1], &h.rank) || !absl::SimpleAtoi(f[2], &h.world) ||
      !absl::SimpleAtoi(f[3], &h.channel) || (h.channel != 0 && h.channel != 1))
    return std::nullopt;
  h.digest = f[4];
  return h;
}

std::string secondsText(std::chrono::milliseconds t) {
  return t.count() % 1000 ? absl::StrCat(t.count(), " ms")
                          : absl::StrCat(t.count() / 1000, " s");
}

/// Rank 0: accepts the others' two connections each.
absl::StatusOr<std::unique_ptr<RankLinks>>
listenForRanks(const RendezvousOptions &o, const std::string &host,
               const std::string &port, const std::string &payload) {
  const std::string where = absl::StrCat("--rendezvous ", o.address);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo *found = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found))
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", ::gai_strerror(e)));
  int listener = -1;
  std::string why = "no address";
  for (addrinfo *a = found; a && listener < 0; a = a->ai_next) {
    int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(fd, SOMAXCONN) == 0) {
      listener = fd;
      break;
    }
    why = errnoText();
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (listener < 0)
    return absl::UnavailableError(
        absl::StrCat(where, ": rank 0 cannot listen there: ", why));

  auto links = std::make_unique<RankLinks>();
  links->rank = 0;
  links->worldSize = o.worldSize;
  links->payload = payload;
  links->control.resize(o.worldSize);
  links->data.resize(o.worldSize);
  // Every rank that came is told why the run does not start.
  auto refuse = [&](const std::string &message) {
    for (auto *sockets : {&links->control, &links->data})
      for (auto &s : *sockets)
        if (s)
          (void)s->send(FrameKind::Refused, message);
    ::close(listener);
    return absl::FailedPreconditionError(message);
  };
  const auto deadline = Clock::now() + o.timeout;
  int missing = 2 * (o.worldSize - 1);
  while (missing > 0) {
    if (!waitReadable(listener, deadline, nullptr)) {
      std::vector<std::string> absent;
      for (int r = 1; r < o.worldSize; ++r)
        if (!links->control[r] || !links->data[r])
          absent.push_back(absl::StrCat(r));
      return refuse(absl::StrCat(
          where, ": rank 0 waited ", secondsText(o.timeout), " for rank",
          absent.size() > 1 ? "s " : " ", absl::StrJoin(absent, ", "), " of ",
          o.worldSize, " (is it started, with this address?)"));
    }
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    tune(fd);
    auto socket = std::make_unique<RankSocket>(fd, -1);
    // A rank says hello at once; a stray client that says nothing is
    // dropped after a few seconds, not held until the deadline.
    auto frame = socket->receive(
        std::min(deadline, Clock::now() + std::chrono::seconds(5)));
    std::optional<Hello> h;
    if (frame.ok() && frame->kind == FrameKind::Hello)
      h = parseHello(frame->bytes);
    if (!h) {
      // Not a rank of kiln's (a port scan, a stray client): ignored.
      (void)socket->send(FrameKind::Refused,
                         absl::StrCat(where, ": not a kiln rank's hello"));
      continue;
    }
    std::string fault;
    if (h->world != o.worldSize)
      fault = absl::StrCat("rank ", h->rank, " says --world-size ", h->world,
                           ", rank 0 ", o.worldSize);
    else if (h->rank < 1 || h->rank >= o.worldSize)
      fault = absl::StrCat("a process says it is rank ", h->rank,
                           ": the others are 1 to ", o.worldSize - 1);
    else if ((h->channel == 0 ? links->control : links->data)[h->rank])
      fault = absl::StrCat("two processes say they are rank ", h->rank);
    else if (h->digest != o.digest)
      fault = absl::StrCat("rank ", h->rank, "'s bundle differs from rank 0's",
                           " (", h->digest, ", rank 0's ", o.digest,
                           "): every rank runs the same bundle on the same "
                           "kind of device");
    if (!fault.empty()) {
      std::string message = absl::StrCat(where, ": ", fault);
      (void)socket->send(FrameKind::Refused, message);
      return refuse(message);
    }
    socket->setPeer(h->rank);
    (h->channel == 0 ? links->control : links->data)[h->rank] =
        std::move(socket);
    --missing;
  }
  ::close(listener);
  for (int r = 1; r < o.worldSize; ++r)
    for (auto *sockets : {&links->control, &links->data})
      if (absl::Status s = (*sockets)[r]->send(FrameKind::Welcome, payload);
          !s.ok())
        return s;
  return links;
}

/// Another rank: connects to rank 0 (retrying until it listens). Rank 0
/// may have refused this rank on its `control` connection meanwhile (and
/// stopped listening): then that is the answer.
absl::StatusOr<std::unique_ptr<RankSocket>>
connectToRankZero(const RendezvousOptions &o, const std::string &host,
                  const std::string &port, Clock::time_point deadline,
                  RankSocket *control) {
  const std::string where = absl::StrCat("--rendezvous ", o.address);
  std::string why;
  for (;;) {
    addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    if (int e = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found)) {
      why = ::gai_strerror(e);
    } else {
      for (addrinfo *a = found; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                          a->ai_protocol);
        if (fd < 0)
          continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          tune(fd);
          return std::make_unique<RankSocket>(fd, 0);
        }
        why = errnoText();
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    if (control && control->readable()) {
      auto answer = control->receive(deadline);
      if (answer.ok() && answer->kind == FrameKind::Refused)
        return absl::FailedPreconditionError(answer->bytes);
      return absl::UnavailableError(absl::StrCat(
          where, ": rank 0 closed the connection of rank ", o.rank,
          answer.ok() ? "" : absl::StrCat(": ", answer.status().message())));
    }
    if (Clock::now() >= deadline)
      return absl::UnavailableError(absl::StrCat(
          where, ": rank ", o.rank, " could not reach rank 0 within ",
          secondsText(o.timeout), " (", why, ")"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace

RankSocket::~RankSocket() { ::close(fd_); }

bool RankSocket::readable() const {
  pollfd p = {fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

absl::Status RankSocket::send(FrameKind kind, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(sending_);
  Header h = {uint32_t(kind), 0, bytes.size()};
  auto all = [&](const char *p, size_t n) -> absl::Status {
    while (n) {
      ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0 && (errno == EPIPE || errno == ECONNRESET))
        return absl::UnavailableError(absl::StrCat(
            rankName(peer_), " closed its connection (it exited or died)"));
      if (w <= 0)
        return absl::UnavailableError(
            absl::StrCat("the connection to ", rankName(peer_), " broke (",
                         errnoText(), "): it exited or died"));
      p += w;
      n -= size_t(w);
    }
    return absl::OkStatus();
  };
  if (absl::Status s = all(reinterpret_cast<const char *>(&h), sizeof h);
      !s.ok())
    return s;
  return all(bytes.data(), bytes.size());
}

absl::StatusOr<Frame>
RankSocket::receive(std::optional<Clock::time_point> deadline,
                    const std::atomic<bool> *stop) {
  auto all = [&](char *p, size_t n) -> absl::Status {
    while (n) {
      if (!waitReadable(fd_, deadline, stop)) {
        if (stop && stop->load())
          return absl::CancelledError(
              absl::StrCat("stopped waiting for ", rankName(peer_)));
        return absl::DeadlineExceededError(
            absl::StrCat("waited too long for ", rankName(peer_)));
      }
      ssize_t r = ::recv(fd_, p, n, 0);
      if (r < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (r <= 0)
        return absl::UnavailableError(absl::StrCat(
            rankName(peer_), " closed its connection (it exited or died)"));
      p += r;
      n -= size_t(r);
    }
    return absl::OkStatus();
  };
  Header h;
  if (absl::Status s = all(reinterpret_cast<char *>(&h), sizeof h); !s.ok())
    return s;
  if (h.zero != 0 || h.bytes > kMaxFrameBytes || h.kind < 1 ||
      h.kind > uint32_t(FrameKind::Abort))
    return absl::DataLossError(
        absl::StrCat(rankName(peer_), " sent what is not a kiln frame (kind ",
                     h.kind, ", ", h.bytes, " bytes)"));
  Frame f;
  f.kind = FrameKind(h.kind);
  f.bytes.resize(h.bytes);
  if (absl::Status s = all(f.bytes.data(), f.bytes.size()); !s.ok())
    return s;
  return f;
}

absl::Status checkRendezvous(const RendezvousOptions &o) {
  if (auto split = splitAddress(o.address); !split.ok())
    return split.status();
  if (o.worldSize < 2 || o.worldSize > 64)
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size: ", o.worldSize, " is not from 2 to 64 ranks"));
  if (o.rank < 0 || o.rank >= o.worldSize)
    return absl::InvalidArgumentError(
        absl::StrCat("--rank: ", o.rank, " is not from 0 to ", o.worldSize - 1,
                     " (--world-size ", o.worldSize, ")"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RankLinks>>
rendezvous(const RendezvousOptions &o, const std::string &payload) {
  if (absl::Status s = checkRendezvous(o); !s.ok())
    return s;
  auto [host, port] = *splitAddress(o.address);
  if (o.rank == 0)
    return listenForRanks(o, host, port, payload);
  const std::string where = absl::StrCat("--rendezvous ", o.address);
  const auto deadline = Clock::now() + o.timeout;
  auto links = std::make_unique<RankLinks>();
  links->rank = o.rank;
  links->worldSize = o.worldSize;
  for (int channel = 0; channel < 2; ++channel) {
    auto socket = connectToRankZero(o, host, port, deadline,
                                    channel == 1 ? links->control.front().get()
                                                 : nullptr);
    if (!socket.ok())
      return socket.status();
    absl::Status sent = (*socket)->send(FrameKind::Hello, hello(o, channel));
    // A data connection rank 0 dropped: its answer on control says why.
    if (!sent.ok() && channel == 0)
      return sent;
    (channel == 0 ? links->control : links->data).push_back(std::move(*socket));
  }
  for (int channel = 0; channel < 2; ++channel) {
    RankSocket &s = *(channel == 0 ? links->control : links->data)[0];
    // Rank 0 answers when every rank has come: up to its own timeout.
    auto answer = s.receive(deadline + o.timeout);
    if (!answer.ok())
      return absl::Status(answer.status().code(),
                          absl::StrCat(where, ": rank ", o.rank,
                                       " got no answer from rank 0: ",
                                       answer.status().message()));
    if (answer->kind == FrameKind::Refused)
      return absl::FailedPreconditionError(answer->bytes);
    if (answer->kind != FrameKind::Welcome)
      return absl::DataLossError(absl::StrCat(
          where, ": rank 0 answered with frame kind ", uint32_t(answer->kind)));
    if (channel == 0)
      links->payload = answer->bytes;
  }
  return links;
}

} // namespace kiln
