//===- CostModel.h - how long a launch takes, without a GPU -----*- C++ -*-===//
//
// An analytic model of one kernel launch, for kiln tune where no GPU is:
// the launch's blocks run in waves of what fits on the multiprocessors at
// once (occupancy from threads, registers and shared memory, with the
// hardware's allocation granularity), each wave limited by the HBM and L2
// bytes it moves (at a bandwidth that needs enough bytes in flight, so low
// occupancy and narrow loads cost) or by its FLOPs, plus the launch
// overhead. A last wave that is not full costs as much as a full one does
// when the SMs it leaves idle cannot be used (the tail).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TUNE_COSTMODEL_H
#define KILN_TUNE_COSTMODEL_H

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

/// A GPU as the model sees it.
struct GpuModel {
  std::string name;
  int sms = 132;
  double hbmBytesPerSecond = 4.8e12, l2BytesPerSecond = 12e12;
  double flops = 60e12;          // fp32 on CUDA cores
  double tensorFlops = 990e12;   // fp16 in, fp32 accumulate, tensor cores
  double memoryLatency = 600e-9; // seconds: bytes in flight = BW x latency
  int maxThreadsPerSm = 2048, registersPerSm = 65536, maxBlocksPerSm = 32;
  int64_t sharedBytesPerSm = 228 * 1024;
  double launchMicros = 1.5; // a kernel node of a CUDA graph
};

/// The model of a target's GPU: sm_90 an H200, sm_80 an A100; none for
/// other targets.
std::optional<GpuModel> gpuModelFor(const std::string &target);

/// One launch: its shape, ptxas' figures and the traffic it makes.
struct LaunchCost {
  std::array<int64_t, 3> grid = {1, 1, 1};
  int64_t threads = 0;
  int registers = 0;
  int64_t sharedBytes = 0;
  double hbmBytes = 0, l2Bytes = 0, flops = 0;
  /// Bytes each thread keeps in flight per load (16 for 8-half vectors).
  int loadBytes = 16;
  /// Loads each thread keeps in flight at once.
  int loadsInFlight = 4;
};

/// Blocks of `l` one multiprocessor holds at once (0: it does not fit).
int blocksPerSm(const GpuModel &gpu, const LaunchCost &l);

/// Microseconds for the launch; nullopt when a block does not fit.
std::optional<double> launchMicros(const GpuModel &gpu, const LaunchCost &l);

/// Microseconds for a cuBLAS GEMM C[m, n] f32 = A[m, k] . W[n, k]^T (f16):
/// its tensor-core FLOPs or its bytes, whichever takes longer. The same for
/// every algorithm: which of cuBLASLt's is fastest only a GPU can say. A
/// residual GEMM (f16 D = A . W^T + C, C f16) moves the same 4 bytes an
/// output as an f32 D; the LM head of a prompt read back by no one is m = 1.
double gemmMicros(const GpuModel &gpu, int64_t m, int64_t n, int64_t k);

} // namespace kiln

#endif // KILN_TUNE_COSTMODEL_H
