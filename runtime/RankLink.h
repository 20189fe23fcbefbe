//===- RankLink.h - connections between ranks as processes ------*- C++ -*-===//
//
// A split model's ranks may be processes, on one machine or several
// (kiln-run --rendezvous HOST:PORT --rank R --world-size W, as torchrun
// names them; docs/tensor-parallel.md). Rank 0 listens on HOST:PORT and
// every other rank connects to it twice: a control connection, on which
// rank 0 sends each step's inputs and commands and the rank answers, and a
// data connection for the emu device's collectives (SocketCollective; the
// cuda device's go through NCCL, whose unique id rank 0 hands out here).
// Every rank says which bundle it runs (a digest of its bytes): a rank
// whose bundle differs is refused, and every rank says so.
//
// Messages are frames: a u32 kind, a u32 zero, a u64 length, then that
// many bytes (little-endian, the machines' own order: x86-64 and aarch64).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_RANKLINK_H
#define KILN_RUNTIME_RANKLINK_H

#include "absl/status/statusor.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

enum class FrameKind : uint32_t {
  Hello = 1, // a rank to rank 0: "kiln-rank RANK WORLD CHANNEL DIGEST"
  Welcome,   // rank 0's answer: its payload (NCCL's unique id, or none)
  Refused,   // rank 0's answer: why not
  Command,   // a step's command, on the control connection (RemoteRank)
  Reply,     // its status
  Stop,      // the run is over: empty, or rank 0's error
  Input,     // a collective's input, to rank 0
  Result,    // a collective's result, from rank 0
  Abort,     // a rank failed: why ("rank R: ...")
};

struct Frame {
  FrameKind kind = FrameKind::Hello;
  std::string bytes;
};

/// One TCP connection to another rank.
class RankSocket {
public:
  /// `fd`, connected to rank `peer`.
  RankSocket(int fd, int peer) : fd_(fd), peer_(peer) {}
  ~RankSocket();
  RankSocket(const RankSocket &) = delete;
  RankSocket &operator=(const RankSocket &) = delete;

  int peer() const { return peer_; }
  void setPeer(int peer) { peer_ = peer; }
  /// Whether a frame (or the end of the connection) waits to be read.
  bool readable() const;
  /// Sends a frame whole (safe from several threads).
  absl::Status send(FrameKind kind, std::string_view bytes);
  /// The next frame. Fails when the peer closes the connection (naming
  /// it), at `deadline`, or when `*stop` becomes true (looked at every 50
  /// ms).
  absl::StatusOr<Frame>
  receive(std::optional<std::chrono::steady_clock::time_point> deadline =
              std::nullopt,
          const std::atomic<bool> *stop = nullptr);

private:
  int fd_;
  int peer_;
  std::mutex sending_;
};

struct RendezvousOptions {
  std::string address; // "host:port": where rank 0 listens
  int rank = 0, worldSize = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// What every rank must run alike: the bundle's digest and the device
  /// ("1f2e.../cuda"); a rank whose differs is refused.
  std::string digest;
};

/// This process's connections to the other ranks.
struct RankLinks {
  int rank = 0, worldSize = 1;
  std::string payload; // rank 0's bytes for every rank
  /// Rank 0: [worldSize], by rank, [0] null; another rank: [1], to rank 0.
  std::vector<std::unique_ptr<RankSocket>> control, data;
};

/// Meets the other ranks at `options.address`. Rank 0 gives `payload` to
/// every rank (the others pass nothing). Fails, naming the rank and the
/// fault, on a rank that does not come within the timeout, a second rank
/// of one number, another world size or another bundle; the ranks that
/// came are told why.
absl::StatusOr<std::unique_ptr<RankLinks>>
rendezvous(const RendezvousOptions &options, const std::string &payload = "");

/// "--rendezvous HOST:PORT --rank R --world-size W" checked: the port a
/// number from 1 to 65535, 0 <= R < W, W from 2 to 64.
absl::Status checkRendezvous(const RendezvousOptions &options);

} // namespace kiln

#endif // KILN_RUNTIME_RANKLINK_H
