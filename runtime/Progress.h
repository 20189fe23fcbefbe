//===- Progress.h - a progress line for long work ---------------*- C++ -*-===//
//
// Long work (packing a 13 GB checkpoint) shows one line on stderr that
// updates in place: "kiln: weights  42% (5.3 of 12.6 GiB)". Only on a
// terminal, so logs and tests stay clean; KILN_PROGRESS=1 forces it (each
// update on its own line then), KILN_PROGRESS=0 silences it.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PROGRESS_H
#define KILN_RUNTIME_PROGRESS_H

#include <cstdint>
#include <string>

namespace kiln {

class Progress {
public:
  /// `what` of `total` bytes (or, with `unit`, of `total` such things:
  /// "lengths"); silent below `minimum` unless forced.
  Progress(std::string what, int64_t total, int64_t minimum = 256 << 20,
           std::string unit = "");
  ~Progress();
  /// `done` bytes so far; prints when the percentage moves.
  void update(int64_t done);

private:
  std::string what_, unit_;
  int64_t total_;
  int lastPercent_ = -1;
  bool show_ = false, inPlace_ = false;
};

} // namespace kiln

#endif // KILN_RUNTIME_PROGRESS_H
