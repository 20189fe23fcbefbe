//===- RemoteRank.cpp -----------------------------------------------------===//
#include "runtime/RemoteRank.h"

#include "absl/strings/str_cat.h"

#include <cstring>
#include <type_traits>

namespace kiln {
namespace {

enum class Op : uint8_t { Inputs = 1, Tables, LogitBias, Run, ClearHistory };

/// A command's bytes: plain values and vectors of them (length first).
class Writer {
public:
  template <class T> Writer &pod(const T &v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char *>(&v), sizeof v);
    return *this;
  }
  template <class T> Writer &vec(const std::vector<T> &v) {
    pod(uint64_t(v.size()));
    out_.append(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
    return *this;
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

class Reader {
public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T> bool pod(T &v) {
    if (in_.size() < sizeof v)
      return false;
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return true;
  }
  /// Into `v`, whose size the sender's must equal (both ranks sized it
  /// from the same Program).
  template <class T> bool vec(std::vector<T> &v) {
    uint64_t n = 0;
    if (!pod(n) || n != v.size() || in_.size() < n * sizeof(T))
      return false;
    std::memcpy(v.data(), in_.data(), n * sizeof(T));
    in_.remove_prefix(n * sizeof(T));
    return true;
  }
  bool done() const { return in_.empty(); }

private:
  std::string_view in_;
};

std::string encodeStatus(const absl::Status &s) {
  Writer w;
  w.pod(uint32_t(s.code()));
  std::string out = w.take();
  out += std::string(s.message());
  return out;
}

absl::Status decodeStatus(const std::string &bytes) {
  uint32_t code = 0;
  if (bytes.size() < sizeof code)
    return absl::DataLossError("a rank's answer is too short");
  std::memcpy(&code, bytes.data(), sizeof code);
  if (code > uint32_t(absl::StatusCode::kUnauthenticated))
    code = uint32_t(absl::StatusCode::kUnknown);
  return absl::Status(absl::StatusCode(code), bytes.substr(sizeof code));
}

} // namespace

RemoteRank::RemoteRank(Program program, RankSocket &socket,
                       const std::atomic<bool> *failed,
                       std::chrono::milliseconds grace)
    : PlanDevice(std::move(program)), socket_(socket), failed_(failed),
      grace_(grace) {}

RemoteRank::~RemoteRank() {
  (void)socket_.send(FrameKind::Stop, std::string(failure_.message()));
}

std::string RemoteRank::name() const {
  return absl::StrCat("rank ", socket_.peer());
}

absl::Status RemoteRank::call(const std::string &command) {
  if (absl::Status s = socket_.send(FrameKind::Command, command); !s.ok())
    return s;
  // No deadline while the run is well: a step takes as long as it takes
  // (its collectives have theirs). Once one failed, the rank has `grace_`
  // to answer.
  auto answer = socket_.receive(std::nullopt, failed_);
  if (!answer.ok() && absl::IsCancelled(answer.status()))
    answer = socket_.receive(std::chrono::steady_clock::now() + grace_);
  if (!answer.ok())
    return answer.status();
  if (answer->kind != FrameKind::Reply)
    return absl::DataLossError(
        absl::StrCat(name(), " answered with frame kind ",
                     uint32_t(answer->kind), ", not a reply"));
  absl::Status s = decodeStatus(answer->bytes);
  if (s.ok())
    return s;
  return absl::Status(s.code(), absl::StrCat(name(), ": ", s.message()));
}

absl::Status RemoteRank::sendInputs(int64_t rows) {
  Writer w;
  w.pod(Op::Inputs).pod(rows).pod(count_).vec(tokens_).vec(positions_);
  w.vec(rowSeqs_).vec(sampling_);
  return call(w.take());
}

absl::Status RemoteRank::sendTables() {
  Writer w;
  w.pod(Op::Tables).vec(tables_);
  return call(w.take());
}

absl::Status RemoteRank::sendLogitBias(int32_t seq) {
  // The slot's row: [vocab] of [sequences, vocab].
  std::vector<float> row(logitBias_.begin() + int64_t(seq) * program_.vocab,
                         logitBias_.begin() +
                             int64_t(seq + 1) * program_.vocab);
  Writer w;
  w.pod(Op::LogitBias).pod(seq).vec(row);
  return call(w.take());
}

absl::Status RemoteRank::run(const std::vector<Launch> &launches) {
  std::optional<PlanRef> ref = program_.refOf(launches);
  if (!ref)
    return absl::InternalError(
        absl::StrCat(name(), ": a plan that is not its Program's"));
  Writer w;
  w.pod(Op::Run).pod(*ref).pod(count_).pod(uint8_t(everyLogit_));
  return call(w.take());
}

absl::Status RemoteRank::clearHistory(int32_t seq) {
  Writer w;
  w.pod(Op::ClearHistory).pod(seq);
  return call(w.take());
}

absl::Status RemoteRank::readLogits(int64_t, float *, size_t) {
  return absl::InternalError(
      absl::StrCat(name(), ": logits are read on rank 0"));
}

absl::Status RemoteRank::followRankZero(PlanDevice &d, int rank,
                                        RankSocket &control,
                                        RankAbort &collectives) {
  absl::Status first; // this rank's first failure
  const Program &p = d.program_;
  for (;;) {
    auto frame = control.receive();
    if (!frame.ok())
      return first.ok() ? absl::Status(frame.status().code(),
                                       absl::StrCat("rank 0 ended the run "
                                                    "without a word: ",
                                                    frame.status().message()))
                        : first;
    if (frame->kind == FrameKind::Stop) {
      if (!first.ok())
        return first;
      if (!frame->bytes.empty())
        return absl::AbortedError(
            absl::StrCat("rank 0 failed: ", frame->bytes));
      return absl::OkStatus();
    }
    if (frame->kind != FrameKind::Command)
      return absl::DataLossError(absl::StrCat(
          "rank 0 sent frame kind ", uint32_t(frame->kind), ", not a command"));
    Reader r(frame->bytes);
    Op op{};
    bool read = r.pod(op);
    absl::Status s;
    auto malformed = [&] {
      return absl::DataLossError(absl::StrCat(
          "rank 0's command ", int(op),
          " does not fit this rank's plans (ranks that run different "
          "bundles?)"));
    };
    switch (op) {
    case Op::Inputs: {
      int64_t rows = 0;
      read = read && r.pod(rows) && r.pod(d.count_) && r.vec(d.tokens_) &&
             r.vec(d.positions_) && r.vec(d.rowSeqs_) && r.vec(d.sampling_) &&
             r.done();
      s = read ? d.sendInputs(rows) : malformed();
      break;
    }
    case Op::Tables:
      read = read && r.vec(d.tables_) && r.done();
      s = read ? d.sendTables() : malformed();
      break;
    case Op::LogitBias: {
      int32_t seq = 0;
      std::vector<float> row(p.vocab);
      read = read && r.pod(seq) && seq >= 0 && seq < p.sequences &&
             r.vec(row) && r.done();
      if (read)
        std::copy(row.begin(), row.end(),
                  d.logitBias_.begin() + int64_t(seq) * p.vocab);
      s = read ? d.sendLogitBias(seq) : malformed();
      break;
    }
    case Op::Run: {
      PlanRef ref;
      uint8_t every = 0;
      read = read && r.pod(ref) && r.pod(d.count_) && r.pod(every) && r.done();
      const std::vector<Launch> *plan = read ? p.plan(ref) : nullptr;
      d.everyLogit_ = every != 0;
      s = plan ? d.run(*plan) : malformed();
      break;
    }
    case Op::ClearHistory: {
      int32_t seq = 0;
      read = read && r.pod(seq) && seq >= 0 && seq < p.sequences && r.done();
      s = read ? d.clearHistory(seq) : malformed();
      break;
    }
    default:
      s = malformed();
    }
    if (!s.ok()) {
      collectives.abort(rank, s);
      if (first.ok())
        first = s;
    }
    if (absl::Status sent = control.send(FrameKind::Reply, encodeStatus(s));
        !sent.ok())
      return first.ok() ? sent : first;
  }
}

} // namespace kiln
