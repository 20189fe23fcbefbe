//===- CostModel.cpp ------------------------------------------------------===//
#include "tune/CostModel.h"

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

/// GH100 as an H200 SXM or an H100 SXM: 132 SMs, the dense fp16 tensor
/// peak (989.4 TFLOP/s: 4096 FLOPs an SM a clock at 1.83 GHz) and the
/// CUDA cores at the same clock; they differ in HBM (4.8 TB/s of HBM3e,
/// 3.35 TB/s of HBM3).
GpuModel gh100(const char *name, const char *shortName, double hbm) {
  GpuModel g;
  g.name = name;
  g.shortName = shortName;
  g.sms = 132;
  g.clockHz = 1.83e9;
  g.hbmBytesPerSecond = hbm;
  g.fmaLanesPerSm = 128;
  g.flops = g.sms * g.fmaLanesPerSm * 2 * g.clockHz;
  g.tensorFlops = g.sms * 4096.0 * g.clockHz;
  g.fp8TensorFlops = 2 * g.tensorFlops;
  g.mmaSyncShare = 2.0 / 3.0;
  g.dependentLaunch = true;
  return g;
}

} // namespace

GpuModel serialEndsReading(GpuModel gpu) {
  gpu.serialEnds = true;
  gpu.issueEfficiency = 1;
  return gpu;
}

std::optional<GpuModel> gpuModelFor(const std::string &target) {
  std::vector<GpuModel> models = gpuModelsFor(target);
  if (models.empty())
    return std::nullopt;
  return models.front();
}

std::vector<GpuModel> gpuModelsFor(const std::string &target) {
  if (target == "sm_90")
    return {gh100("NVIDIA H200 (cost model)", "H200", 4.8e12),
            gh100("NVIDIA H100 SXM (cost model)", "H100", 3.35e12)};
  if (target == "sm_80") {
    // A100 SXM 80GB: 108 SMs at 1.41 GHz, 64 FP32 lanes and 2048 dense
    // fp16 tensor FLOPs an SM a clock (19.5 and 312 TFLOP/s), 2.0 TB/s
    // (2.039) of HBM2e; mma.sync is its native tensor-core instruction.
    GpuModel a100;
    a100.name = "NVIDIA A100 80GB (cost model)";
    a100.shortName = "A100";
    a100.sms = 108;
    a100.clockHz = 1.41e9;
    a100.hbmBytesPerSecond = 2.0e12;
    a100.l2BytesPerSecond = 5e12;
    a100.fmaLanesPerSm = 64;
    a100.flops = a100.sms * a100.fmaLanesPerSm * 2 * a100.clockHz;
    a100.tensorFlops = a100.sms * 2048.0 * a100.clockHz;
    a100.fp8TensorFlops = 0; // no FP8 tensor cores
    a100.mmaSyncShare = 1.0;
    a100.sharedBytesPerSm = 164 * 1024;
    return {a100};
  }
  return {};
}

double passFlops(const WarpWork &w) {
  double tensor = w.mmaFlops + w.wgmmaFlops;
  return tensor > 0 ? tensor : 32.0 * w.fmaFlopsPerLane;
}

ComputeRate computeRate(const GpuModel &gpu, const WarpWork &w) {
  ComputeRate r;
  r.tensorCores = w.mmaFlops + w.wgmmaFlops > 0;
  double useful = passFlops(w);
  if (useful <= 0)
    return r;
  double peak = gpu.tensorFlopsPerSmCycle();
  std::pair<double, const char *> pipes[] = {
      {w.mmaFlops / (peak * gpu.mmaSyncShare) + w.wgmmaFlops / peak,
       "tensor cores"},
      {32.0 * w.fma / gpu.fmaLanesPerSm, "FMA pipe"},
      {w.instructions / (gpu.issuePerSm * gpu.issueEfficiency), "issue"},
      {32.0 * w.mufu / gpu.sfuLanesPerSm, "SFU"},
      {w.sharedCycles, "shared memory"},
  };
  auto busiest = std::max_element(
      std::begin(pipes), std::end(pipes),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  r.flopsPerSmCycle = useful / busiest->first;
  r.limiter = busiest->second;
  return r;
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

std::optional<LaunchEstimate> estimateLaunch(const GpuModel &gpu,
                                             const LaunchCost &l) {
  int per = blocksPerSm(gpu, l);
  if (per == 0)
    return std::nullopt;
  LaunchEstimate e;
  e.blocksPerSm = per;
  int64_t blocks = std::max<int64_t>(l.grid[0] * l.grid[1] * l.grid[2], 1);
  int64_t concurrent = int64_t(gpu.sms) * per;
  double perThread = l.bytesInFlight > 0
                         ? l.bytesInFlight
                         : double(l.loadBytes) * double(l.loadsInFlight);
  double warpsPerBlock = double((l.threads + 31) / 32);
  // The passes of its loop each warp makes, at least one (serialEnds).
  double passes = l.passFlops > 0
                      ? std::max(1.0, l.flops / (double(blocks) *
                                                 warpsPerBlock * l.passFlops))
                      : 0;
  double needed = gpu.hbmBytesPerSecond * gpu.memoryLatency; // in flight
  double peak = l.flopsPerSmCycle > 0
                    ? l.flopsPerSmCycle * gpu.sms * gpu.clockHz
                : l.tensorCores ? gpu.tensorFlops * gpu.mmaSyncShare
                                : gpu.flops;
  struct Wave {
    double seconds, memory, compute, bandwidth;
  };
  // One wave of `wave` blocks: its share of the traffic, at the bandwidth
  // its bytes in flight reach (Little's law), or its FLOPs at the share of
  // the cores its warps fill (CUDA cores: half the threads an SM holds fill
  // them; tensor cores: a warp each sub-partition); never under two memory
  // latencies. With serialEnds, plus the shorter of the two over a warp's
  // passes: its first loads wait for no work, its last pass for no loads.
  auto waveOf = [&](int64_t wave) {
    double share = double(wave) / double(blocks);
    double inFlight = double(wave) * double(l.threads) * perThread;
    double bandwidth =
        std::min(gpu.reachableHbm(), inFlight / gpu.memoryLatency);
    double efficiency = std::min(1.0, inFlight / needed);
    double memory = (l.hbmBytes * share) / bandwidth +
                    (l.l2Bytes * share) / (gpu.l2BytesPerSecond * efficiency);
    double fill =
        l.tensorCores
            ? std::min(1.0, double(wave) * warpsPerBlock / gpu.sms / 4.0)
            : std::min(1.0, double(wave) * double(l.threads) /
                                (gpu.sms * gpu.maxThreadsPerSm / 2.0));
    double compute = l.flops * share / (peak * fill);
    double ends =
        gpu.serialEnds && passes > 0 ? std::min(memory, compute) / passes : 0;
    return Wave{std::max({memory, compute, 2 * gpu.memoryLatency}) + ends,
                memory, compute, bandwidth};
  };
  int64_t full = blocks / concurrent, last = blocks % concurrent;
  e.waves = full + (last ? 1 : 0);
  double seconds = 0;
  std::optional<Wave> first;
  using Waves = std::pair<int64_t, int64_t>; // how many, of how many blocks
  for (auto [count, size] : {Waves{full, concurrent}, Waves{1, last}}) {
    if (count == 0 || size == 0)
      continue;
    Wave w = waveOf(size);
    if (!first)
      first = w; // the full waves' (or the only one's)
    seconds += double(count) * w.seconds;
    e.memoryMicros += double(count) * w.memory * 1e6;
    e.computeMicros += double(count) * w.compute * 1e6;
  }
  e.bandwidth = first->bandwidth;
  e.bound =
      first->seconds == 2 * gpu.memoryLatency &&
              std::max(first->memory, first->compute) < 2 * gpu.memoryLatency
          ? "latency"
      : first->compute > first->memory                ? "compute"
      : first->bandwidth < gpu.reachableHbm() * 0.999 ? "bytes in flight"
                                                      : "memory";
  e.micros = seconds * 1e6 + gpu.launchMicros;
  return e;
}

std::optional<double> launchMicros(const GpuModel &gpu, const LaunchCost &l) {
  auto e = estimateLaunch(gpu, l);
  if (!e)
    return std::nullopt;
  return e->micros;
}

double gemmBytes(int64_t m, int64_t n, int64_t k, bool fp8) {
  return (double(m) * double(k) + double(n) * double(k)) * (fp8 ? 1 : 2) +
         double(m) * double(n) * 4;
}

double gemmMicros(const GpuModel &gpu, int64_t m, int64_t n, int64_t k,
                  bool fp8) {
  double flops = 2.0 * double(m) * double(n) * double(k);
  double peak =
      fp8 && gpu.fp8TensorFlops > 0 ? gpu.fp8TensorFlops : gpu.tensorFlops;
  return std::max(flops / peak, gemmBytes(m, n, k, fp8) / gpu.reachableHbm()) *
             1e6 +
         gpu.launchMicros;
}

} // namespace kiln
