//===- CostModel.cpp ------------------------------------------------------===//
#include "tune/CostModel.h"

#include <algorithm>
#include <cmath>

namespace kiln {

std::optional<GpuModel> gpuModelFor(const std::string &target) {
  if (target == "sm_90") {
    GpuModel h200;
    h200.name = "NVIDIA H200 (cost model)";
    return h200;
  }
  if (target == "sm_80") {
    GpuModel a100;
    a100.name = "NVIDIA A100 80GB (cost model)";
    a100.sms = 108;
    a100.hbmBytesPerSecond = 2.0e12;
    a100.l2BytesPerSecond = 5e12;
    a100.flops = 19.5e12;
    a100.tensorFlops = 312e12;
    a100.sharedBytesPerSm = 164 * 1024;
    return a100;
  }
  return std::nullopt;
}

int blocksPerSm(const GpuModel &gpu, const LaunchCost &l) {
  if (l.threads <= 0 || l.threads > 1024)
    return 0;
  int64_t warps = (l.threads + 31) / 32;
  // Registers are allocated per warp in units of 256.
  int64_t perWarp = (int64_t(std::max(l.registers, 1)) * 32 + 255) / 256 * 256;
  int64_t fit =
      std::min<int64_t>(gpu.maxBlocksPerSm, gpu.maxThreadsPerSm / (warps * 32));
  fit = std::min<int64_t>(fit, gpu.registersPerSm / (perWarp * warps));
  if (l.sharedBytes > 0) // 1 KiB of each block's shared memory is reserved
    fit = std::min<int64_t>(fit, gpu.sharedBytesPerSm / (l.sharedBytes + 1024));
  return int(std::max<int64_t>(fit, 0));
}

std::optional<double> launchMicros(const GpuModel &gpu, const LaunchCost &l) {
  int per = blocksPerSm(gpu, l);
  if (per == 0)
    return std::nullopt;
  int64_t blocks = l.grid[0] * l.grid[1] * l.grid[2];
  int64_t concurrent = int64_t(gpu.sms) * per;
  double needed = gpu.hbmBytesPerSecond * gpu.memoryLatency; // in flight
  // One wave of `wave` blocks: its share of the traffic, at the bandwidth
  // its bytes in flight reach (loadsInFlight per thread), or its FLOPs at the
  // share of the ALUs its threads fill (half the threads an SM holds fill
  // them); never under two memory latencies.
  auto waveSeconds = [&](int64_t wave) {
    double share = double(wave) / double(blocks);
    double inFlight =
        double(wave) * double(l.threads) * l.loadBytes * l.loadsInFlight;
    double efficiency = std::min(1.0, inFlight / needed);
    double memory =
        (l.hbmBytes * share) / (gpu.hbmBytesPerSecond * efficiency) +
        (l.l2Bytes * share) / (gpu.l2BytesPerSecond * efficiency);
    double alus = std::min(1.0, double(wave) * double(l.threads) /
                                    (gpu.sms * gpu.maxThreadsPerSm / 2.0));
    double compute = l.flops * share / (gpu.flops * alus);
    return std::max({memory, compute, 2 * gpu.memoryLatency});
  };
  int64_t full = blocks / concurrent, last = blocks % concurrent;
  double seconds = double(full) * (full ? waveSeconds(concurrent) : 0.0) +
                   (last ? waveSeconds(last) : 0.0);
  return seconds * 1e6 + gpu.launchMicros;
}

double gemmMicros(const GpuModel &gpu, int64_t m, int64_t n, int64_t k) {
  double flops = 2.0 * double(m) * double(n) * double(k);
  double bytes = (double(m) * double(k) + double(n) * double(k)) * 2 +
                 double(m) * double(n) * 4;
  return std::max(flops / gpu.tensorFlops, bytes / gpu.hbmBytesPerSecond) *
             1e6 +
         gpu.launchMicros;
}

} // namespace kiln
