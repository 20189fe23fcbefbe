//===- CudaDevice.h - a Program on an NVIDIA GPU ----------------*- C++ -*-===//
#ifndef KILN_RUNTIME_CUDA_CUDADEVICE_H
#define KILN_RUNTIME_CUDA_CUDADEVICE_H

#include "runtime/HostCollective.h"
#include "runtime/PlanDevice.h"
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/NcclCollectives.h"

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <set>

namespace kiln {

/// Compiled kernels by kernel name, then target (sm_90, ...).
using KernelBinaries =
    std::map<std::string, std::map<std::string, std::string>>;

/// A kernel's code as the driver is offered it: "CUBIN for sm_90" or "PTX
/// for sm_80", and its bytes; and the PTX it was made from (a CUBIN's, of
/// the same compile, when the bundle has it; a PTX image's own text),
/// which says whether the code waits for the previous kernel.
struct KernelImage {
  std::string what, bytes, ptx;
};

/// Whether a kernel's PTX waits for the previous grid (griddepcontrol.wait,
/// codegen's kiln_wait_previous_grid): only such a kernel may be launched
/// with programmatic dependent launch. Code for a target before sm_90, a
/// bundle of an older kiln, a template without the wait: launched plainly.
bool ptxWaitsForPreviousGrid(const std::string &ptx);

/// Whether the cuda device launches kernels with programmatic dependent
/// launch (docs/kernels.md, "Programmatic dependent launch"), and when not,
/// a line saying why for the user (empty when there is nothing to report:
/// KILN_CUDA_PDL=0, or a GPU before sm_90, where it does not exist).
/// `env`: $KILN_CUDA_PDL (null when unset); `driverVersion`: the CUDA
/// version the driver supports (cuDriverGetVersion: 12030 for 12.3).
struct PdlChoice {
  bool on = false;
  std::string why;
};
PdlChoice choosePdl(const char *env, int computeMajor, int driverVersion,
                    bool hasLaunchKernelEx);

/// What the cuda device offers the driver for `kernel` on `target`, in
/// order: the CUBIN for the target, then the PTX of the newest target no
/// newer than it (the driver compiles it). After both, NVRTC compiles the
/// source on the GPU machine.
std::vector<KernelImage> kernelImages(const std::string &kernel,
                                      const KernelBinaries &cubin,
                                      const KernelBinaries &ptx,
                                      const std::string &target);

/// The GPU the cuda device would use (device 0): its name and target.
struct CudaGpu {
  std::string name, target; // "NVIDIA H200", "sm_90"
  std::string driver;       // the CUDA version the driver supports: "12.4"
};
absl::StatusOr<CudaGpu> probeCudaGpu();

/// Runs a Program on GPU 0 through the driver API: each kernel's CUBIN for
/// the GPU's target, else (missing, or refused by an older driver) the PTX
/// of the newest older target, which the driver compiles, else its source,
/// compiled by NVRTC here; the weights
/// packed on the host and copied once, one allocation per region of the plan
/// (after checking that they fit), and the plan's GEMMs through cuBLAS, all on
/// one stream; each decode plan (one sequence, and each batch bucket) is
/// captured as a CUDA graph once and replayed (its launches read tokens,
/// positions, sequences and tables from device memory, so one graph serves
/// every step). Random weights are one random block uploaded once and
/// copied on the device into every buffer (their values do not matter to a
/// benchmark).
class CudaDevice : public PlanDevice {
public:
  /// `nvrtc`: the NVRTC version that made the CUBIN and PTX (named when the
  /// driver refuses them); `gpu`: the device ordinal (a rank's GPU).
  static absl::StatusOr<std::unique_ptr<CudaDevice>>
  create(Program program, const KernelBinaries &cubin,
         const KernelBinaries &ptx, const std::string &nvrtc,
         const WeightProvider &weights, int gpu = 0);
  ~CudaDevice() override;

  std::string name() const override { return "cuda"; }
  /// Overwrites a buffer twice the L2's size.
  absl::Status flushCaches() override;
  absl::StatusOr<Memory> probe() override;
  absl::Status bindThread() override;

  /// Rank `rank` of a split model (docs/tensor-parallel.md) whose
  /// collectives are NCCL's on `comm`, enqueued on the step's stream and
  /// captured in its graphs: all-reduce sums f16 (rank 0 adds the residual
  /// to its input first, with cublasAxpyEx in f32), all-gather gathers f32
  /// and, for more than one row, puts the ranks' columns side by side with
  /// cuMemcpy2DAsync. A step that does not finish within `timeout` aborts
  /// all of `group`'s communicators (NCCL's C API has no watchdog of its
  /// own). Its communicator is `group`'s `index`th; the group outlives the
  /// device.
  absl::Status joinNccl(NcclGroup *group, int index, int rank,
                        std::chrono::milliseconds timeout);
  /// Rank `rank` whose collectives go through host memory to `collective`
  /// (kernel by kernel, no graphs): ranks that share a GPU, which NCCL
  /// refuses; the GPU check runs a split model so on one GPU.
  void joinHostCollective(HostCollective *collective, int rank);

private:
  explicit CudaDevice(Program program) : PlanDevice(std::move(program)) {}
  absl::Status sendInputs(int64_t rows) override;
  /// Where each step input lies in their one allocation (bytes), and its
  /// size.
  std::vector<std::pair<Region, int64_t>> inputLayout() const;
  int64_t inputBytes() const;
  absl::Status sendTables() override;
  absl::Status run(const std::vector<Launch> &launches) override;
  absl::Status clearHistory(int32_t seq) override;
  absl::Status sendLogitBias(int32_t seq) override;
  absl::Status readLogits(int64_t offset, float *out, size_t floats) override;
  absl::Status readSampled(int64_t rows) override;
  absl::Status allocate(const WeightProvider &weights);
  absl::Status fillRandom(const WeightProvider &weights);
  absl::Status loadKernels(const KernelBinaries &cubin,
                           const KernelBinaries &ptx);
  CUdeviceptr address(const Argument &a) const;
  absl::Status launch(const std::vector<Launch> &launches);
  /// Enqueues `l` (and with KILN_CUDA_SYNC=1 waits for it); errors name it.
  absl::Status launchOne(const Launch &l);
  absl::Status enqueue(const Launch &l);
  /// A collective launch, through NCCL or the host collective.
  absl::Status enqueueCollective(const Launch &l,
                                 const std::vector<CUdeviceptr> &args);
  /// The rows the running plan's collectives move: its real rows, or in a
  /// graph (captured once for every step) all the plan's.
  int64_t collectiveRows() const;
  /// With NCCL: waits for the step so far, aborting the communicator when
  /// it takes longer than the timeout or NCCL reports an error.
  absl::Status waitForCollectives();
  /// A kernel launch: with the PDL attribute when pdl_ (and the kernel
  /// waits; not in a timed step, nor in a capture after pdlInGraphs_ went
  /// off), else plain. A driver that refuses the attribute gets the plain
  /// launch, and PDL is off from then on (said once).
  absl::Status launchKernel(const Launch &l, void **params);
  /// Lets `function` take k's dynamic shared memory; an error naming the
  /// kernel where the GPU's blocks cannot hold it.
  absl::Status allowDynamicShared(const KernelCode &k, CUfunction function);
  /// Says once on stderr that PDL is off, and why.
  void reportPdlOff(const std::string &why);
  /// `r` of a call that waits for the step; its error names the plan.
  absl::Status stepFinished(CUresult r, const char *call) const;
  /// Each launch between two events; their times into timing_.
  absl::Status launchTimed(const std::vector<Launch> &launches);
  bool isDecodePlan(const std::vector<Launch> &launches) const;
  absl::StatusOr<CUgraphExec> capture(const std::vector<Launch> &launches);
  /// Makes cuBLASLt's descriptors and algorithm of every GEMM launch that
  /// goes to cuBLASLt, at its plan's full rows: a refusal shows at start.
  absl::Status prepareLtGemms();
  /// cuBLASLt's descriptors and chosen algorithm for `mm`, made on first
  /// use (a prefill's m is its real token count) and kept.
  struct LtGemm {
    LtMatmulDescs descs;
    cublasLtMatmulAlgo_t algo = {};
  };
  absl::StatusOr<const LtGemm *> ltGemm(const BlasMatmul &mm,
                                        const std::string &name);
  /// Runs `mm`, the BlasMatmul of GEMM launch `l`.
  absl::Status blasMatmul(const BlasMatmul &mm, const Launch &l);

  const CudaDriver *cu_ = nullptr;
  const Cublas *blas_ = nullptr;
  Cublas::Handle blasHandle_ = nullptr;
  CUdeviceptr blasWorkspace_ = 0; // cuBLAS's and cuBLASLt's, one stream
  size_t blasWorkspaceBytes_ = 0;
  const CublasLt *lt_ = nullptr;
  cublasLtHandle_t ltHandle_ = nullptr;
  // By every field of the call but its pointers and scalars.
  std::map<std::vector<int64_t>, LtGemm> ltGemms_;
  CUdevice gpu_ = 0;
  CUcontext ctx_ = nullptr;
  std::string target_;
  std::vector<CUmodule> modules_;
  std::vector<CUfunction> functions_; // by kernel index
  std::map<Region, CUdeviceptr> regions_;
  std::map<std::string, CUdeviceptr> weights_;
  std::vector<char> staging_; // the step's inputs, packed for one copy
  std::vector<CUdeviceptr> allocations_;
  CUstream stream_ = nullptr; // every launch; syncs with the default
  // The decode plans' graphs, captured once each on a plan's second step;
  // null: it failed (run kernel by kernel).
  std::map<const std::vector<Launch> *, CUgraphExec> graphs_;
  std::set<const std::vector<Launch> *> warmed_; // plans run once eagerly
  std::vector<CUgraph> graphSources_;
  bool useGraphs_ = true; // KILN_CUDA_GRAPHS=0: off
  bool sync_ = false;     // KILN_CUDA_SYNC=1: wait after each launch
  // Programmatic dependent launch (choosePdl): kernels whose code waits
  // (waits_, by kernel index) launch with the attribute, eagerly and in
  // captured graphs (pdlInGraphs_: off after a capture with it failed).
  bool pdl_ = false, pdlInGraphs_ = true, capturing_ = false;
  bool pdlReported_ = false;
  std::vector<bool> waits_;
  const std::vector<Launch> *plan_ = nullptr; // the plan being run
  std::string driverVersion_, bundleNvrtc_;   // "12.4", "13.0"
  std::vector<CUevent> events_; // launchTimed's, made on first use
  CUdeviceptr flushBuffer_ = 0; // flushCaches': [2 * L2 bytes]
  int64_t flushBytes_ = 0;
  // A split model's rank: NCCL's communicator, or a host collective.
  NcclGroup *ncclGroup_ = nullptr;
  ncclComm_t comm_ = nullptr; // ncclGroup_'s
  HostCollective *hostCollective_ = nullptr;
  int rank_ = 0;
  std::chrono::milliseconds collectiveTimeout_{std::chrono::seconds(60)};
  CUdeviceptr gathered_ = 0; // [ranks, rows, cols] f32: NCCL's all-gather
};

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_CUDADEVICE_H
