//===- EmuDevice.cpp ------------------------------------------------------===//
#include "runtime/EmuDevice.h"
#include "runtime/BlasMatmul.h"
#include "runtime/Generate.h"
#include "runtime/Progress.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace kiln {
namespace {
// The launch running now, as a fault names it ("kiln: emu device: signal
// 11 (Segmentation fault) in kernel kiln_... (..., plan decode)\n").
std::atomic<const char *> runningLaunch{nullptr};

void nameTheFault(int signal) {
  // Only what is safe in a signal handler: write(2), then the default
  // action again (the faulting access repeats and ends the process).
  if (const char *what = runningLaunch.load()) {
    const char *name = signal == SIGSEGV  ? "11 (Segmentation fault)"
                       : signal == SIGBUS ? "7 (Bus error)"
                                          : "8 (Floating point exception)";
    for (const char *part : {"kiln: emu device: signal ", name, " in ", what})
      (void)!::write(2, part, std::strlen(part));
  }
  std::signal(signal, SIG_DFL);
}

/// A fault in a kernel names the launch, as KILN_CUDA_SYNC=1 does on the
/// cuda device; unless another handler is there first (a sanitizer's,
/// whose report names the kernel's function itself).
void nameFaults() {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE}) {
    struct sigaction old = {};
    if (::sigaction(signal, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
      continue;
    struct sigaction mine = {};
    mine.sa_handler = nameTheFault;
    sigemptyset(&mine.sa_mask);
    ::sigaction(signal, &mine, nullptr);
  }
}
} // namespace

absl::StatusOr<std::unique_ptr<EmuDevice>>
EmuDevice::create(Program program, const WeightProvider &weights) {
  std::unique_ptr<EmuDevice> dev(new EmuDevice(std::move(program)));
  const Program &p = dev->program_;
  // KILN_EMU_MEMORY=BYTES plays a GPU of that size: the same check as the
  // cuda device's, before anything is allocated.
  if (const char *limit = std::getenv("KILN_EMU_MEMORY"); limit && *limit) {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(limit, &bytes) || bytes <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("KILN_EMU_MEMORY: '", limit, "' is not a byte count"));
    // What the cuda device would allocate besides the plan, but an L2
    // flush buffer (emu has no L2 to flush).
    if (absl::Status s = dev->checkMemory(
            bytes, absl::StrCat("KILN_EMU_MEMORY allows ", bytes, " bytes"),
            gpuMemoryBeside(p, weights.isRandom(), 0));
        !s.ok())
      return s;
  }
  // KILN_EMU_ORDER is read by the kernels (runtime/emu/cuda_emu.h); a bad
  // value is refused here, where there is a clean way to say so.
  if (const char *order = std::getenv("KILN_EMU_ORDER"); order && *order) {
    std::string o = order;
    if (o != "forward" && o != "reverse" && o != "shuffle")
      return absl::InvalidArgumentError(absl::StrCat(
          "KILN_EMU_ORDER: '", o, "' is not forward, reverse or shuffle"));
  }
  auto kernels = compileEmuKernels(p.kernels);
  if (!kernels.ok())
    return kernels.status();
  dev->kernels_ = std::move(*kernels);
  int64_t total = 0, done = 0;
  for (const WeightBuffer &w : p.weights)
    total += weightBufferBytes(w);
  Progress progress("weights", total);
  for (const WeightBuffer &w : p.weights) {
    auto packed = weights.pack(w);
    if (!packed.ok())
      return packed.status();
    done += int64_t(packed->size());
    dev->weights_[w.name] = std::move(*packed);
    progress.update(done);
  }
  dev->arena_.assign(p.arenaBytes, 0);
  dev->pool_.assign(p.poolBytes, 0);
  dev->workspace_.assign(p.workspaceFloats, 0.0f);
  dev->dequantized_.assign(p.dequantizedHalves, 0);
  dev->counters_.assign(p.counters, 0);
  dev->history_.assign(p.sequences * p.vocab, 0);
  return dev;
}

void *EmuDevice::address(const Argument &a) {
  switch (a.region) {
  case Region::Arena:
    return arena_.data() + a.offset;
  case Region::Weight:
    return weights_.at(a.weight).data();
  case Region::Pool:
    return pool_.data() + a.offset;
  case Region::Tokens:
    return tokens_.data();
  case Region::Positions:
    return positions_.data();
  case Region::BlockTable:
    return tables_.data();
  case Region::RowSequence:
    return rowSeqs_.data();
  case Region::Workspace:
    return workspace_.data();
  case Region::Dequantized:
    return reinterpret_cast<char *>(dequantized_.data()) + a.offset;
  case Region::Counters:
    return counters_.data();
  case Region::Sampled:
    return sampled_.data();
  case Region::Count:
    return count_.data();
  case Region::Sampling:
    return sampling_.data();
  case Region::History:
    return history_.data();
  case Region::LogitBias:
    return logitBias_.data();
  }
  return nullptr;
}

absl::Status EmuDevice::run(const std::vector<Launch> &launches) {
  static const bool named = (nameFaults(), true);
  (void)named;
  // Each plan's launches described once, for a fault's message.
  std::vector<std::string> &names = launchNames_[&launches];
  if (names.empty())
    for (const Launch &l : launches)
      names.push_back(describeLaunch(l, launches) + "\n");
  for (size_t i = 0; i < launches.size(); ++i) {
    const Launch &l = launches[i];
    if (!runs(l))
      continue;
    runningLaunch.store(names[i].c_str());
    auto began = std::chrono::steady_clock::now();
    std::vector<void *> args;
    for (const Argument &a : l.args)
      args.push_back(address(a));
    if (l.kernel == kAllReduce || l.kernel == kAllGather) {
      absl::Status s;
      int64_t rows = count_[0];
      if (!collective_)
        s = absl::FailedPreconditionError(
            "a collective in the plan of a device that is no rank");
      else if (l.kernel == kAllReduce)
        s = collective_->allReduce(
            rank_, static_cast<const uint16_t *>(args.front()),
            args.size() == 3 ? static_cast<const uint16_t *>(args[1]) : nullptr,
            static_cast<uint16_t *>(args.back()), rows * l.collectiveCols);
      else
        s = collective_->allGather(rank_, static_cast<const float *>(args[0]),
                                   static_cast<float *>(args[1]), rows,
                                   l.collectiveCols);
      if (!s.ok()) {
        runningLaunch.store(nullptr);
        return s;
      }
    } else if (l.kernel == kGemm) {
      // The very call the cuda device makes, run by the stand-in.
      if (absl::Status s = emuBlasMatmul(blasMatmulOf(l.gemm, count_[0], args));
          !s.ok()) {
        runningLaunch.store(nullptr);
        return absl::Status(
            s.code(),
            absl::StrCat(s.message(), ", at ", describeLaunch(l, launches)));
      }
    } else {
      kernels_[l.kernel](unsigned(l.grid[0]), unsigned(l.grid[1]),
                         unsigned(l.grid[2]), unsigned(l.blockThreads),
                         args.data());
    }
    recordLaunch(l, secondsSince(began) * 1e6);
  }
  runningLaunch.store(nullptr);
  return absl::OkStatus();
}

absl::Status EmuDevice::readLogits(int64_t offset, float *out, size_t floats) {
  std::memcpy(out, arena_.data() + offset, floats * sizeof(float));
  return absl::OkStatus();
}

} // namespace kiln
