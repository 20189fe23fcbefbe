//===- CostModel.h - how long a launch takes, without a GPU -----*- C++ -*-===//
//
// An analytic model of one kernel launch, for kiln tune where no GPU is and
// for the predictions of kiln compile --stats (tune/Predict.h;
// docs/cost-model.md): the launch's blocks run in waves of what fits on
// the multiprocessors at once (occupancy from threads, registers and shared
// memory, with the hardware's allocation granularity), each wave limited by
// the HBM and L2 bytes it moves (at a bandwidth that needs enough bytes in
// flight, by Little's law, so low occupancy and narrow loads cost) or by
// its FLOPs (on CUDA cores or tensor cores, at the rate the kernel's
// instruction mix allows), plus the launch overhead. A last wave that is
// not full costs as much as a full one does when the SMs it leaves idle
// cannot be used (the tail).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TUNE_COSTMODEL_H
#define KILN_TUNE_COSTMODEL_H

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// A GPU as the model sees it. Every figure is a data-sheet figure or
/// derived from per-clock rates at one clock (docs/cost-model.md gives the
/// sources); hbmEfficiency and memoryLatency are assumptions,
/// issueEfficiency a fit to what an H200 measured.
struct GpuModel {
  std::string name;      // the tuning database's key ("NVIDIA H200 (cost
                         // model)")
  std::string shortName; // for tables: "H200"
  int sms = 132;
  double clockHz = 1.83e9; // the clock the tensor-core peak is quoted at
  double hbmBytesPerSecond = 4.8e12, l2BytesPerSecond = 12e12;
  /// The share of the spec bandwidth a streaming read reaches at best (an
  /// assumption; an H200's copies reached 0.88 of it: bench/RESULTS.md).
  double hbmEfficiency = 0.9;
  double flops = 61.8e12;        // fp32 on CUDA cores: sms x 128 x 2 x clock
  double tensorFlops = 989.4e12; // fp16 in, fp32 accumulate, dense
  /// e4m3 in, fp32 accumulate, dense: twice fp16's on sm_89 and sm_90
  /// (cuBLASLt's FP8 GEMM reached 1.8x its f16 GEMM on an H200,
  /// bench/RESULTS.md); 0 where there are no FP8 tensor cores.
  double fp8TensorFlops = 1978.9e12;
  /// The share of tensorFlops warp-level mma.sync (SASS HMMA) reaches: on
  /// sm_90 only wgmma (HGMMA) reaches the peak.
  double mmaSyncShare = 2.0 / 3.0;
  /// Per SM and clock: FMA-pipe lanes (FFMA, HFMA2), special-function
  /// lanes (MUFU), warp instructions issued (one scheduler per quarter),
  /// shared-memory bytes.
  int fmaLanesPerSm = 128, sfuLanesPerSm = 16, issuePerSm = 4;
  /// The share of its issue slots a scheduler fills in a compute loop
  /// (stalls on dependences, the pipes' queues): fit to the eight
  /// quantized decode GEMVs an H200 timed on 2026-12-04, whose loops
  /// (0.18 instructions a weight) bound them at this share within 10%
  /// (docs/cost-model.md, "Calibration"); assumed on the other GPUs.
  double issueEfficiency = 0.56;
  int sharedBytesPerClock = 128;
  double memoryLatency = 600e-9; // seconds: bytes in flight = BW x latency
  int maxThreadsPerSm = 2048, registersPerSm = 65536, maxBlocksPerSm = 32;
  int64_t sharedBytesPerSm = 228 * 1024;
  double launchMicros = 1.5; // a kernel node of a CUDA graph
  /// Programmatic dependent launch (sm_90 on): a kernel that waits for the
  /// previous grid, after one that triggers its dependents, is launched
  /// while that grid runs; of its launch overhead only this much is left
  /// (an assumption: the previous grid's completion and memory flush, which
  /// its wait still waits for).
  bool dependentLaunch = false;
  double dependentLaunchMicros = 0.5;
  /// Between GPUs (tensor parallelism): NVLink's bandwidth a direction
  /// (NVLink 4 on H100/H200 SXM: 900 GB/s both ways), and the latency of
  /// one all-reduce or all-gather of a decode step's few kilobytes (an
  /// assumption: 4-10 us is what NCCL's small all-reduces take on H100
  /// NVLink; unmeasured by kiln).
  double linkBytesPerSecond = 450e9;
  double collectiveMicros = 6;
  /// The other reading of the H200's decode GEMV times (docs/cost-model.md,
  /// "Two readings"): a warp's first loads and its last pass's work do not
  /// overlap, so a wave takes the longer of memory and compute plus the
  /// shorter over the passes of its loop each warp makes, with every issue
  /// slot filled (serialEndsReading). Off: the two overlap perfectly.
  bool serialEnds = false;

  /// The HBM bandwidth a launch can reach with enough bytes in flight.
  double reachableHbm() const { return hbmBytesPerSecond * hbmEfficiency; }
  /// The dense tensor-core FLOPs an SM completes per clock.
  double tensorFlopsPerSmCycle() const {
    return tensorFlops / (double(sms) * clockHz);
  }
};

/// `gpu` under the other reading of 2026-12-04's times: serialEnds, and
/// issueEfficiency 1 (the gap the fitted share closes is the ends' here).
GpuModel serialEndsReading(GpuModel gpu);

/// The model of a target's GPU: sm_90 an H200, sm_80 an A100; none for
/// other targets.
std::optional<GpuModel> gpuModelFor(const std::string &target);

/// Every GPU modelled for a target, the tuner's first: sm_90 the H200 and
/// the H100 SXM (the same chip, 3.35 TB/s of HBM3), sm_80 the A100.
std::vector<GpuModel> gpuModelsFor(const std::string &target);

/// One warp's pass through a kernel's compute loop, by the SM pipe each
/// instruction uses (sass::PipeWork's figures): instructions issued, FMA
/// pipe instructions and their FLOPs per lane, MUFU instructions, shared
/// memory cycles, and tensor-core FLOPs of mma.sync (HMMA) and wgmma
/// (HGMMA).
struct WarpWork {
  double instructions = 0, fma = 0, fmaFlopsPerLane = 0, mufu = 0;
  double sharedCycles = 0, mmaFlops = 0, wgmmaFlops = 0;
};

/// The useful FLOPs of one pass of `w`: its tensor cores' when it has any,
/// else 32 lanes' FMA FLOPs.
double passFlops(const WarpWork &w);

/// The FLOPs an SM completes per clock running `w` over and over with its
/// pipes all busy, and the pipe that limits it: the useful FLOPs of a pass
/// (the tensor cores' when it has any, else the FMA pipe's) over its
/// cycles on the busiest pipe (issue: instructions / (issuePerSm x
/// issueEfficiency); FMA:
/// 32 x fma / fmaLanesPerSm; SFU: 32 x mufu / sfuLanesPerSm; shared
/// memory; tensor cores: mmaFlops at mmaSyncShare of the peak, wgmma at
/// the peak). Zero when the pass does no FLOPs.
struct ComputeRate {
  double flopsPerSmCycle = 0;
  bool tensorCores = false;
  std::string limiter; // "tensor cores", "FMA pipe", "issue", "SFU", ...
};
ComputeRate computeRate(const GpuModel &gpu, const WarpWork &w);

/// One launch: its shape, ptxas' figures and the traffic it makes.
struct LaunchCost {
  std::array<int64_t, 3> grid = {1, 1, 1};
  int64_t threads = 0;
  int registers = 0;
  int64_t sharedBytes = 0; // a block's, static and dynamic
  double hbmBytes = 0, l2Bytes = 0, flops = 0;
  /// Bytes each thread keeps in flight per load (16 for 8-half vectors).
  int loadBytes = 16;
  /// Loads each thread keeps in flight at once.
  int loadsInFlight = 4;
  /// Bytes each thread keeps in flight, as the SASS audit read them from
  /// the steady-state loop; 0: loadBytes x loadsInFlight.
  double bytesInFlight = 0;
  /// Its FLOPs run on tensor cores: a quarter of an SM's tensor cores per
  /// warp it holds (one a sub-partition), at mmaSyncShare of the peak
  /// unless flopsPerSmCycle says otherwise.
  bool tensorCores = false;
  /// The FLOPs an SM completes per clock as its instruction mix allows
  /// (computeRate); 0: the peak of the cores it uses.
  double flopsPerSmCycle = 0;
  /// The useful FLOPs of one warp's pass of its compute loop (passFlops):
  /// each warp makes flops / (warps x this) passes, which serialEnds reads;
  /// 0: no loop known (serialEnds adds nothing).
  double passFlops = 0;
};

/// Blocks of `l` one multiprocessor holds at once (0: it does not fit).
int blocksPerSm(const GpuModel &gpu, const LaunchCost &l);

/// What the model makes of a launch: its time and why.
struct LaunchEstimate {
  double micros = 0;       // all of it, the launch overhead included
  double memoryMicros = 0; // its bytes at the bandwidth each wave reaches
  double computeMicros = 0;
  /// The HBM bandwidth its full waves reach (Little's law: bytes in flight
  /// over the latency, at most reachableHbm).
  double bandwidth = 0;
  /// What limits it: "memory" (HBM at its reachable rate), "bytes in
  /// flight" (too few for that), "compute", or "latency" (each wave's
  /// floor of two memory latencies).
  std::string bound;
  int blocksPerSm = 0;
  int64_t waves = 0; // full waves, and a tail if the blocks leave one
};
std::optional<LaunchEstimate> estimateLaunch(const GpuModel &gpu,
                                             const LaunchCost &l);

/// Microseconds for the launch; nullopt when a block does not fit.
std::optional<double> launchMicros(const GpuModel &gpu, const LaunchCost &l);

/// Microseconds for a cuBLAS GEMM C[m, n] f32 = A[m, k] . W[n, k]^T (f16):
/// its tensor-core FLOPs at the dense peak or its bytes at the reachable
/// HBM bandwidth, whichever takes longer. The same for every algorithm:
/// which of cuBLASLt's is fastest only a GPU can say. A residual GEMM (f16
/// D = A . W^T + C, C f16) moves the same 4 bytes an output as an f32 D;
/// the LM head of a prompt read back by no one is m = 1.
/// With `fp8`, cuBLASLt's FP8 GEMM: A and W a byte an element, at the
/// FP8 tensor peak.
double gemmMicros(const GpuModel &gpu, int64_t m, int64_t n, int64_t k,
                  bool fp8 = false);
/// The bytes gemmMicros counts: A and W once, 4 bytes an output.
double gemmBytes(int64_t m, int64_t n, int64_t k, bool fp8 = false);

} // namespace kiln

#endif // KILN_TUNE_COSTMODEL_H
