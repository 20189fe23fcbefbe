//===- Progress.cpp -------------------------------------------------------===//
#include "runtime/Progress.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace kiln {

Progress::Progress(std::string what, int64_t total, int64_t minimum,
                   std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total) {
  const char *mode = std::getenv("KILN_PROGRESS");
  std::string m = mode ? mode : "";
  if (m == "1") {
    show_ = true;
  } else if (m != "0") {
    inPlace_ = isatty(2);
    show_ = inPlace_ && total >= minimum;
  }
}

Progress::~Progress() {
  if (show_ && inPlace_ && lastPercent_ >= 0)
    std::fputc('\n', stderr);
}

void Progress::update(int64_t done) {
  if (!show_ || total_ <= 0)
    return;
  int percent = int(done * 100 / total_);
  if (percent == lastPercent_)
    return;
  lastPercent_ = percent;
  if (!unit_.empty()) {
    std::fprintf(stderr, "%skiln: %s %3d%% (%lld of %lld %s)%s",
                 inPlace_ ? "\r" : "", what_.c_str(), percent, (long long)done,
                 (long long)total_, unit_.c_str(), inPlace_ ? "" : "\n");
    std::fflush(stderr);
    return;
  }
  bool gib = total_ >= (int64_t(1) << 30);
  double unit = gib ? double(1 << 30) : double(1 << 20);
  std::fprintf(stderr, "%skiln: %s %3d%% (%.2f of %.2f %s)%s",
               inPlace_ ? "\r" : "", what_.c_str(), percent, done / unit,
               total_ / unit, gib ? "GiB" : "MiB", inPlace_ ? "" : "\n");
  std::fflush(stderr);
}

} // namespace kiln
