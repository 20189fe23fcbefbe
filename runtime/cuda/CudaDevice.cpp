//===- CudaDevice.cpp -----------------------------------------------------===//
#include "runtime/cuda/CudaDevice.h"
#include "runtime/Progress.h"
#include "runtime/cuda/NcclCollectives.h"
#include "runtime/cuda/Nvrtc.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cublas_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace kiln {
namespace {
#define KILN_CU(call)                                                          \
  if (absl::Status s_ = cu_->check(cu_->call, #call); !s_.ok())                \
    return s_;

std::string mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", double(bytes) / (1 << 20));
}
} // namespace

absl::StatusOr<CudaGpu> probeCudaGpu() {
  auto cu = CudaDriver::get();
  if (!cu.ok())
    return cu.status();
  const CudaDriver &d = **cu;
  if (absl::Status s = d.check(d.init(0), "cuInit"); !s.ok())
    return s;
  int count = 0;
  if (absl::Status s = d.check(d.deviceGetCount(&count), "cuDeviceGetCount");
      !s.ok())
    return s;
  if (count == 0)
    return absl::FailedPreconditionError("cuda device: the driver sees no GPU");
  CUdevice dev;
  char name[256] = {};
  int major = 0, minor = 0;
  if (absl::Status s = d.check(d.deviceGet(&dev, 0), "cuDeviceGet"); !s.ok())
    return s;
  d.deviceGetName(name, sizeof name, dev);
  d.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       dev);
  d.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       dev);
  int version = 0;
  d.driverGetVersion(&version);
  return CudaGpu{name, absl::StrCat("sm_", major, minor),
                 absl::StrCat(version / 1000, ".", version % 1000 / 10)};
}

absl::StatusOr<std::unique_ptr<CudaDevice>>
CudaDevice::create(Program program, const KernelBinaries &cubin,
                   const KernelBinaries &ptx, const std::string &nvrtc,
                   const WeightProvider &weights, int gpuIndex) {
  auto gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  std::unique_ptr<CudaDevice> dev(new CudaDevice(std::move(program)));
  dev->cu_ = *CudaDriver::get();
  dev->target_ = gpu->target;
  const CudaDriver *cu_ = dev->cu_;
  KILN_CU(deviceGet(&dev->gpu_, gpuIndex));
  KILN_CU(primaryCtxRetain(&dev->ctx_, dev->gpu_));
  KILN_CU(ctxSetCurrent(dev->ctx_));
  // A blocking stream: ordered with the synchronous copies of the inputs
  // and the logits on the default stream.
  KILN_CU(streamCreate(&dev->stream_, CU_STREAM_DEFAULT));
  if (const char *g = std::getenv("KILN_CUDA_GRAPHS");
      g && std::string(g) == "0")
    dev->useGraphs_ = false;
  // KILN_CUDA_SYNC=1: every launch is waited for, so that a fault is
  // reported with the launch that made it (no graphs: a capture cannot
  // wait).
  if (const char *sync = std::getenv("KILN_CUDA_SYNC");
      sync && std::string(sync) == "1") {
    dev->sync_ = true;
    dev->useGraphs_ = false;
  }
  dev->driverVersion_ = gpu->driver;
  dev->bundleNvrtc_ = nvrtc.empty() ? "unknown" : nvrtc;
  int major = 0, version = 0;
  cu_->deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                          dev->gpu_);
  cu_->driverGetVersion(&version);
  PdlChoice pdl = choosePdl(std::getenv("KILN_CUDA_PDL"), major, version,
                            cu_->launchKernelEx != nullptr);
  dev->pdl_ = pdl.on;
  if (!pdl.why.empty())
    dev->reportPdlOff(pdl.why);
  if (absl::Status s = dev->loadKernels(cubin, ptx); !s.ok())
    return s;
  if (absl::Status s = dev->allocate(weights); !s.ok())
    return s;
  bool gemms = false;
  for (const auto *plans : {&dev->program_.prefill, &dev->program_.batches})
    for (const StepPlan &plan : *plans)
      for (const Launch &l : plan.launches)
        gemms = gemms || l.kernel == kGemm;
  // A split model's rank 0 adds the residual with cuBLAS.
  if (gemms || dev->program_.ranks > 1) {
    auto blas = Cublas::get();
    if (!blas.ok())
      return blas.status();
    dev->blas_ = *blas;
    constexpr size_t workspace = kCublasWorkspaceBytes;
    CUdeviceptr scratch;
    KILN_CU(memAlloc(&scratch, workspace));
    dev->allocations_.push_back(scratch);
    dev->blasWorkspace_ = scratch;
    dev->blasWorkspaceBytes_ = workspace;
    if (dev->blas_->create(&dev->blasHandle_) != 0 ||
        dev->blas_->setStream(dev->blasHandle_, dev->stream_) != 0 ||
        dev->blas_->setWorkspace(dev->blasHandle_,
                                 reinterpret_cast<void *>(scratch),
                                 workspace) != 0)
      return absl::InternalError(
          "cuda device: cublasCreate, cublasSetStream or cublasSetWorkspace "
          "failed");
    if (absl::Status s = dev->prepareLtGemms(); !s.ok())
      return s;
  }
  return dev;
}

CudaDevice::~CudaDevice() {
  if (!cu_)
    return;
  for (auto &[key, g] : ltGemms_)
    g.descs.destroy(*lt_);
  if (ltHandle_)
    lt_->destroy(ltHandle_);
  if (blasHandle_)
    blas_->destroy(blasHandle_);
  for (auto &[plan, exec] : graphs_)
    if (exec)
      cu_->graphExecDestroy(exec);
  for (CUgraph g : graphSources_)
    cu_->graphDestroy(g);
  for (CUevent e : events_)
    cu_->eventDestroy(e);
  if (stream_)
    cu_->streamDestroy(stream_);
  for (CUdeviceptr p : allocations_)
    cu_->memFree(p);
  for (CUmodule m : modules_)
    cu_->moduleUnload(m);
  if (ctx_)
    cu_->primaryCtxRelease(gpu_);
}

namespace {
/// 90 for "sm_90" (and "sm_90a"); -1 for a name that is not a target.
int targetNumber(const std::string &target) {
  int n = 0;
  size_t digits = target.find_first_not_of("0123456789", 3);
  if (target.rfind("sm_", 0) != 0 ||
      !absl::SimpleAtoi(target.substr(3, digits == std::string::npos
                                             ? std::string::npos
                                             : digits - 3),
                        &n))
    return -1;
  return n;
}
} // namespace

bool ptxWaitsForPreviousGrid(const std::string &ptx) {
  return ptx.find("griddepcontrol.wait") != std::string::npos;
}

PdlChoice choosePdl(const char *env, int computeMajor, int driverVersion,
                    bool hasLaunchKernelEx) {
  if (env && std::string(env) == "0")
    return {}; // asked for
  if (computeMajor < 9)
    return {}; // PDL begins with sm_90: nothing to say
  auto off = [&](const std::string &why) {
    return PdlChoice{
        false, absl::StrCat("programmatic dependent launch is off: ", why,
                            "; each kernel starts after the one before it "
                            "(KILN_CUDA_PDL=0 turns it off without this "
                            "line)")};
  };
  if (!hasLaunchKernelEx)
    return off("the CUDA driver has no cuLaunchKernelEx (CUDA 12.0)");
  // Decode plans are CUDA graphs: stream capture keeps the attribute as a
  // programmatic edge from CUDA 12.3 on.
  if (driverVersion < 12030)
    return off(absl::StrCat("the driver supports CUDA ", driverVersion / 1000,
                            ".", driverVersion % 1000 / 10,
                            ", CUDA graphs keep it from 12.3 on"));
  return {true, ""};
}

std::vector<KernelImage> kernelImages(const std::string &kernel,
                                      const KernelBinaries &cubin,
                                      const KernelBinaries &ptx,
                                      const std::string &target) {
  std::vector<KernelImage> images;
  if (auto c = cubin.find(kernel); c != cubin.end())
    if (auto t = c->second.find(target); t != c->second.end()) {
      images.push_back({"CUBIN for " + target, t->second, ""});
      if (auto p = ptx.find(kernel); p != ptx.end())
        if (auto same = p->second.find(target); same != p->second.end())
          images.back().ptx = same->second;
    }
  if (auto p = ptx.find(kernel); p != ptx.end()) {
    int mine = targetNumber(target), best = -1;
    const std::string *text = nullptr;
    for (const auto &[name, bytes] : p->second) {
      int t = targetNumber(name); // a bundle's names are not trusted
      if (t >= 0 && t <= mine && t > best) {
        best = t;
        text = &bytes;
      }
    }
    if (text)
      images.push_back({absl::StrCat("PTX for sm_", best), *text, *text});
  }
  return images;
}

absl::Status CudaDevice::allowDynamicShared(const KernelCode &k,
                                            CUfunction function) {
  int most = 0, fixed = 0;
  KILN_CU(deviceGetAttribute(
      &most, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, gpu_));
  KILN_CU(
      funcGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function));
  if (fixed + k.dynamicSharedBytes > most)
    return absl::FailedPreconditionError(
        "cuda device: " +
        sharedMemoryFault(k, fixed, "this GPU (" + target_ + ")", most));
  KILN_CU(funcSetAttribute(function,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           int(k.dynamicSharedBytes)));
  return absl::OkStatus();
}

absl::Status CudaDevice::loadKernels(const KernelBinaries &cubin,
                                     const KernelBinaries &ptx) {
  int fellBack = 0;     // kernels loaded from other than their first image
  std::string firstWhy; // why the first of them was
  for (const KernelCode &k : program_.kernels) {
    // Each tried in turn when the driver refuses the one before (a driver
    // older than the build machine's NVRTC refuses its CUBIN and PTX); then
    // the source, compiled here by NVRTC.
    std::vector<KernelImage> images = kernelImages(k.name, cubin, ptx, target_);
    std::string refused; // what each refused image was refused for
    CUmodule module = nullptr;
    bool waits = false; // the loaded code waits for the previous grid
    for (auto &[what, image, fromPtx] : images) {
      image.push_back('\0'); // PTX must end with a NUL for cuModuleLoadData
      if (absl::Status s = cu_->check(
              cu_->moduleLoadData(&module, image.data()), "cuModuleLoadData");
          s.ok()) {
        waits = ptxWaitsForPreviousGrid(fromPtx);
        break;
      } else
        absl::StrAppend(&refused, refused.empty() ? "" : "; ", what, ": ",
                        s.message());
      module = nullptr;
    }
    if (!module) {
      auto compiled = nvrtcCompile(k, target_);
      std::string why;
      if (compiled.ok()) {
        compiled->cubin.push_back('\0');
        absl::Status s =
            cu_->check(cu_->moduleLoadData(&module, compiled->cubin.data()),
                       "cuModuleLoadData");
        if (!s.ok()) {
          module = nullptr;
          why = absl::StrCat("NVRTC's CUBIN from here: ", s.message());
        }
        waits = ptxWaitsForPreviousGrid(compiled->ptx);
      } else {
        why = absl::StrCat("NVRTC here: ", compiled.status().message());
      }
      if (!module)
        return absl::FailedPreconditionError(absl::StrCat(
            "cuda device: kernel ", k.name, " does not load on ", target_,
            " (the driver supports CUDA ", driverVersion_,
            ", the bundle's NVRTC is ", bundleNvrtc_, "): ",
            refused.empty() ? "the bundle has no CUBIN or PTX for it" : refused,
            "; ", why));
    }
    if (!refused.empty() && fellBack++ == 0)
      firstWhy = absl::StrCat(k.name, ": ", refused);
    modules_.push_back(module);
    waits_.push_back(waits);
    CUfunction function;
    KILN_CU(moduleGetFunction(&function, module, k.entry.c_str()));
    functions_.push_back(function);
    if (k.dynamicSharedBytes > 0) // past 48 KiB a block must opt in
      if (absl::Status s = allowDynamicShared(k, function); !s.ok())
        return s;
  }
  if (fellBack > 0)
    std::fprintf(stderr,
                 "kiln: cuda device: the driver (CUDA %s) refused the code of "
                 "%d kernels from the bundle's NVRTC %s, which loaded from "
                 "their next choice (PTX, else NVRTC here); the first: %s\n",
                 driverVersion_.c_str(), fellBack, bundleNvrtc_.c_str(),
                 firstWhy.c_str());
  return absl::OkStatus();
}

absl::Status CudaDevice::allocate(const WeightProvider &weights) {
  const Program &p = program_;
  int64_t weightBytes = 0;
  for (const WeightBuffer &w : p.weights)
    weightBytes += weightBufferBytes(w);
  int64_t rows = int64_t(tokens_.size());
  // Every region the plans name, with its size in bytes.
  const std::pair<Region, int64_t> sizes[] = {
      {Region::Arena, p.arenaBytes},
      {Region::Pool, p.poolBytes},
      {Region::Workspace, p.workspaceFloats * 4},
      {Region::Dequantized, p.dequantizedHalves * 2},
      {Region::Counters, p.counters * 4},
      {Region::BlockTable, int64_t(tables_.size()) * 4},
      {Region::Sampled, rows * 4},
      {Region::History, p.sequences * p.vocab * 4},
      {Region::LogitBias, p.sequences * p.vocab * 4},
      {Region::Tokens, inputBytes()}};
  size_t free = 0, all = 0;
  KILN_CU(memGetInfo(&free, &all));
  int l2 = 0;
  KILN_CU(deviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, gpu_));
  if (absl::Status s = checkMemory(
          int64_t(free),
          absl::StrCat("the GPU has ", mib(free), " free of ", mib(all)),
          gpuMemoryBeside(p, weights.isRandom(), std::max(l2, 1 << 20)));
      !s.ok())
    return s;

  auto alloc = [&](int64_t bytes, CUdeviceptr &out) -> absl::Status {
    KILN_CU(memAlloc(&out, std::max<int64_t>(bytes, 4)));
    allocations_.push_back(out);
    KILN_CU(memsetD8(out, 0, std::max<int64_t>(bytes, 4)));
    return absl::OkStatus();
  };
  for (auto [region, bytes] : sizes)
    if (absl::Status s = alloc(bytes, regions_[region]); !s.ok())
      return s;
  // The step's inputs share one allocation (at Tokens), sent in one copy.
  for (auto [region, offset] : inputLayout())
    regions_[region] = regions_[Region::Tokens] + CUdeviceptr(offset);
  staging_.resize(inputBytes());
  if (absl::Status s = sendTables(); !s.ok())
    return s;
  for (const WeightBuffer &w : p.weights)
    if (absl::Status s = alloc(weightBufferBytes(w), weights_[w.name]); !s.ok())
      return s;
  if (weights.isRandom())
    return fillRandom(weights);
  Progress progress("weights", weightBytes);
  int64_t done = 0;
  for (const WeightBuffer &w : p.weights) {
    auto packed = weights.pack(w); // one buffer on the host at a time
    if (!packed.ok())
      return packed.status();
    KILN_CU(memcpyHtoD(weights_[w.name], packed->data(), packed->size()));
    done += int64_t(packed->size());
    progress.update(done);
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::fillRandom(const WeightProvider &weights) {
  // 32 MiB of random halves, scaled for the widest rows, copied into every
  // buffer piece by piece on the device.
  int64_t cols = 1;
  for (const WeightBuffer &w : program_.weights)
    cols = std::max(cols, w.cols);
  std::vector<uint16_t> block =
      weights.randomValues(0, 0, kRandomBlockHalves, cols);
  CUdeviceptr source;
  KILN_CU(memAlloc(&source, block.size() * 2));
  absl::Status status = cu_->check(
      cu_->memcpyHtoD(source, block.data(), block.size() * 2), "cuMemcpyHtoD");
  for (const WeightBuffer &w : program_.weights) {
    int64_t bytes = weightBufferBytes(w);
    for (int64_t at = 0; status.ok() && at < bytes;
         at += int64_t(block.size()) * 2)
      status = cu_->check(
          cu_->memcpyDtoD(weights_[w.name] + at, source,
                          std::min<int64_t>(bytes - at, block.size() * 2)),
          "cuMemcpyDtoD");
  }
  cu_->memFree(source);
  return status;
}

CUdeviceptr CudaDevice::address(const Argument &a) const {
  if (a.region == Region::Weight)
    return weights_.at(a.weight);
  return regions_.at(a.region) + CUdeviceptr(a.offset);
}

absl::Status CudaDevice::clearHistory(int32_t seq) {
  int64_t bytes = program_.vocab * 4;
  KILN_CU(
      memsetD8(regions_[Region::History] + CUdeviceptr(seq * bytes), 0, bytes));
  return absl::OkStatus();
}

std::vector<std::pair<Region, int64_t>> CudaDevice::inputLayout() const {
  // [rows] tokens, positions, sequences; the count; [sequences] sampling.
  int64_t rows = int64_t(tokens_.size());
  return {{Region::Tokens, 0},
          {Region::Positions, rows * 4},
          {Region::RowSequence, rows * 8},
          {Region::Count, rows * 12},
          {Region::Sampling, rows * 12 + 16}};
}

int64_t CudaDevice::inputBytes() const {
  return int64_t(tokens_.size()) * 12 + 16 +
         int64_t(sampling_.size() * sizeof(SamplingParams));
}

absl::Status CudaDevice::sendInputs(int64_t) {
  // A rank but 0 reads nothing back: its last step is waited for here.
  if (absl::Status s = waitForCollectives(); !s.ok())
    return s;
  // One copy of all the inputs: each one costs a driver round trip.
  char *at = staging_.data();
  int64_t rows = int64_t(tokens_.size());
  std::memcpy(at, tokens_.data(), rows * 4);
  std::memcpy(at + rows * 4, positions_.data(), rows * 4);
  std::memcpy(at + rows * 8, rowSeqs_.data(), rows * 4);
  std::memcpy(at + rows * 12, count_.data(), sizeof count_);
  std::memcpy(at + rows * 12 + 16, sampling_.data(),
              sampling_.size() * sizeof(SamplingParams));
  KILN_CU(
      memcpyHtoD(regions_[Region::Tokens], staging_.data(), staging_.size()));
  return absl::OkStatus();
}

absl::Status CudaDevice::sendLogitBias(int32_t seq) {
  int64_t floats = program_.vocab;
  KILN_CU(memcpyHtoD(regions_[Region::LogitBias] +
                         CUdeviceptr(int64_t(seq) * floats * 4),
                     logitBias_.data() + int64_t(seq) * floats, floats * 4));
  return absl::OkStatus();
}

absl::Status CudaDevice::sendTables() {
  KILN_CU(memcpyHtoD(regions_[Region::BlockTable], tables_.data(),
                     tables_.size() * 4));
  return absl::OkStatus();
}

bool CudaDevice::isDecodePlan(const std::vector<Launch> &launches) const {
  if (&launches == &program_.decode)
    return true;
  for (const StepPlan &plan : program_.batches)
    if (&launches == &plan.launches)
      return true;
  return false;
}

absl::Status CudaDevice::run(const std::vector<Launch> &launches) {
  plan_ = &launches;
  if (timing_)
    return launchTimed(launches);
  // Decode steps repeat: each plan is captured once and replayed (their
  // GEMMs multiply the plan's every row: the bundle's reader refuses a
  // batch plan whose GEMM follows the count).
  if (!useGraphs_ || !isDecodePlan(launches))
    return launch(launches);
  auto it = graphs_.find(&launches);
  if (it == graphs_.end() && warmed_.insert(&launches).second)
    // A plan's first step runs eagerly, as PyTorch warms up before a
    // capture: cuBLAS sets itself up and lazily loaded modules load outside
    // the capture.
    return launch(launches);
  if (it == graphs_.end()) {
    auto exec = capture(launches);
    if (!exec.ok())
      // Not fatal: the same launches run one by one.
      std::fprintf(stderr,
                   "kiln: cuda device: no CUDA graph for a decode plan (%s); "
                   "launching it kernel by kernel\n",
                   std::string(exec.status().message()).c_str());
    it = graphs_.emplace(&launches, exec.ok() ? *exec : nullptr).first;
  }
  if (!it->second)
    return launch(launches);
  if (absl::Status s =
          cu_->check(cu_->graphLaunch(it->second, stream_), "cuGraphLaunch");
      !s.ok())
    return absl::Status(s.code(), absl::StrCat(s.message(), " (the graph of ",
                                               planName(launches), ")"));
  return absl::OkStatus();
}

absl::StatusOr<CUgraphExec>
CudaDevice::capture(const std::vector<Launch> &launches) {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  // The PDL attribute is kept in the graph as a programmatic edge (CUDA
  // 12.3 on, choosePdl).
  bool withPdl = pdl_ && pdlInGraphs_;
  KILN_CU(streamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  capturing_ = true;
  absl::Status launched = launch(launches);
  capturing_ = false;
  CUresult ended = cu_->streamEndCapture(stream_, &graph);
  if (graph)
    graphSources_.push_back(graph);
  absl::Status s = launched;
  if (s.ok())
    s = cu_->check(ended, "cuStreamEndCapture");
  if (s.ok()) {
    if (CUresult r = cu_->graphInstantiate(&exec, graph, 0); r != CUDA_SUCCESS)
      s = cu_->check(r, "cuGraphInstantiateWithFlags");
  }
  if (!s.ok() && withPdl) {
    // Once more without PDL in graphs (eager launches keep it).
    pdlInGraphs_ = false;
    auto again = capture(launches);
    if (again.ok())
      reportPdlOff(absl::StrCat(
          "programmatic dependent launch is off in CUDA graphs: a decode "
          "plan's capture with it failed (",
          s.message(), "); a graph's kernels start after the one before"));
    else
      pdlInGraphs_ = true; // not PDL's fault: the next plan tries with it
    return again;
  }
  if (!s.ok())
    return s;
  return exec;
}

absl::Status CudaDevice::prepareLtGemms() {
  for (const auto *plans : {&program_.prefill, &program_.batches})
    for (const StepPlan &plan : *plans)
      for (const Launch &l : plan.launches) {
        if (l.kernel != kGemm)
          continue;
        std::vector<void *> args;
        for (const Argument &a : l.args)
          args.push_back(reinterpret_cast<void *>(address(a)));
        BlasMatmul mm = blasMatmulOf(l.gemm, plan.rows, args);
        if (!mm.usesLt())
          continue;
        if (auto made = ltGemm(mm, l.name); !made.ok())
          return made.status();
      }
  return absl::OkStatus();
}

absl::StatusOr<const CudaDevice::LtGemm *>
CudaDevice::ltGemm(const BlasMatmul &mm, const std::string &name) {
  std::vector<int64_t> key = {int64_t(mm.transA),
                              int64_t(mm.transB),
                              mm.m,
                              mm.n,
                              mm.k,
                              int64_t(mm.compute),
                              int64_t(mm.scale),
                              int64_t(mm.epilogue),
                              mm.batchCount,
                              mm.algo};
  // The pointers' alignments too: the algorithm is chosen for them.
  for (const BlasMatrix *x : {&mm.a, &mm.b, &mm.c, &mm.d})
    key.insert(key.end(), {int64_t(x->type), x->rows, x->cols, x->ld,
                           x->batchStride, int64_t(blasAlignment(x->data))});
  if (auto it = ltGemms_.find(key); it != ltGemms_.end())
    return &it->second;
  auto fail = [&](const std::string &why) {
    return absl::InternalError(absl::StrCat(
        "cuda device: ", why, " for ", describeBlasMatmul(mm), " of ", name));
  };
  if (!lt_) {
    auto lt = CublasLt::get();
    if (!lt.ok())
      return lt.status();
    lt_ = *lt;
    if (int r = lt_->create(&ltHandle_))
      return fail(absl::StrCat("cublasLtCreate: status ", r));
  }
  // Their errors name the call already; the launch is added.
  auto ofLaunch = [&](const absl::Status &s) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " of ", name));
  };
  auto descs = makeLtMatmulDescs(*lt_, mm);
  if (!descs.ok())
    return ofLaunch(descs.status());
  LtGemm g{*descs, {}};
  auto pref = makeLtPreference(*lt_, mm, blasWorkspaceBytes_);
  if (!pref.ok()) {
    g.descs.destroy(*lt_);
    return ofLaunch(pref.status());
  }
  cublasLtMatmulHeuristicResult_t found[kMaxGemmAlgo + 1] = {};
  int count = 0;
  int r = lt_->algoGetHeuristic(ltHandle_, g.descs.desc, g.descs.a, g.descs.b,
                                g.descs.c, g.descs.d, *pref, kMaxGemmAlgo + 1,
                                found, &count);
  lt_->preferenceDestroy(*pref);
  if (r != 0 || count == 0) {
    g.descs.destroy(*lt_);
    return fail(absl::StrCat(
        "cublasLtMatmulAlgoGetHeuristic (no algorithm): status ", r));
  }
  // algo -1 (cuBLAS's choice) is the heuristic's first.
  g.algo = found[std::clamp(mm.algo, 0, count - 1)].algo;
  return &ltGemms_.emplace(std::move(key), g).first->second;
}

absl::Status CudaDevice::blasMatmul(const BlasMatmul &mm, const Launch &l) {
  if (mm.usesLt()) {
    auto g = ltGemm(mm, l.name);
    if (!g.ok())
      return g.status();
    const LtMatmulDescs &d = (*g)->descs;
    // The scales' addresses are the call's (the descriptor is shared by
    // every call of its shape).
    for (auto [attr, scale] :
         {std::pair{CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, mm.scaleA},
          std::pair{CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, mm.scaleB}})
      if (scale)
        if (int r = lt_->descSetAttribute(d.desc, attr, &scale, sizeof scale))
          return absl::InternalError(absl::StrCat(
              "cuda device: cublasLtMatmulDescSetAttribute (scale pointer): "
              "status ",
              r, ", for ", describeBlasMatmul(mm)));
    int r = lt_->matmul(ltHandle_, d.desc, &mm.alpha, mm.a.data, d.a, mm.b.data,
                        d.b, &mm.beta, mm.c.data, d.c, mm.d.data, d.d,
                        &(*g)->algo, reinterpret_cast<void *>(blasWorkspace_),
                        blasWorkspaceBytes_,
                        reinterpret_cast<cudaStream_t>(stream_));
    if (r != 0)
      return absl::InternalError(
          absl::StrCat("cuda device: cublasLtMatmul: status ", r, ", for ",
                       describeBlasMatmul(mm)));
    return absl::OkStatus();
  }
  // cublasGemmEx has no batches or epilogues, and writes C.
  if (mm.batchCount != 1 || mm.epilogue != BlasEpilogue::Default ||
      mm.c.type != mm.d.type || mm.c.ld != mm.d.ld)
    return absl::InternalError(absl::StrCat(
        "cuda device: cublasGemmEx cannot make ", describeBlasMatmul(mm)));
  int r = blas_->gemmEx(blasHandle_, int(mm.transA), int(mm.transB), int(mm.m),
                        int(mm.n), int(mm.k), &mm.alpha, mm.a.data,
                        int(mm.a.type), int(mm.a.ld), mm.b.data, int(mm.b.type),
                        int(mm.b.ld), &mm.beta, mm.d.data, int(mm.d.type),
                        int(mm.d.ld), int(mm.compute), CUBLAS_GEMM_DEFAULT);
  if (r != 0)
    return absl::InternalError(
        absl::StrCat("cuda device: cublasGemmEx: status ", r, ", for ",
                     describeBlasMatmul(mm)));
  return absl::OkStatus();
}

absl::Status CudaDevice::launch(const std::vector<Launch> &launches) {
  for (const Launch &l : launches)
    if (runs(l))
      if (absl::Status s = launchOne(l); !s.ok())
        return s;
  return absl::OkStatus();
}

absl::Status CudaDevice::launchOne(const Launch &l) {
  absl::Status s = enqueue(l);
  if (s.ok() && sync_)
    s = cu_->check(cu_->streamSynchronize(stream_), "cuStreamSynchronize");
  if (!s.ok())
    // A fault shows at the next call that waits: with KILN_CUDA_SYNC=1
    // that is this launch's own synchronize.
    return absl::Status(s.code(), absl::StrCat(s.message(), ", at ",
                                               describeLaunch(l, *plan_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::enqueue(const Launch &l) {
  std::vector<CUdeviceptr> args; // the kernel's parameters
  for (const Argument &a : l.args)
    args.push_back(address(a));
  if (l.kernel == kAllReduce || l.kernel == kAllGather)
    return enqueueCollective(l, args);
  if (l.kernel == kGemm) {
    // The very call the emu device's stand-in runs (runtime/BlasMatmul.h).
    std::vector<void *> ptrs;
    for (CUdeviceptr a : args)
      ptrs.push_back(reinterpret_cast<void *>(a));
    return blasMatmul(blasMatmulOf(l.gemm, count_[0], ptrs), l);
  }
  std::vector<void *> params;
  for (CUdeviceptr &a : args)
    params.push_back(&a);
  return launchKernel(l, params.data());
}

absl::Status CudaDevice::launchKernel(const Launch &l, void **params) {
  CUfunction f = functions_[l.kernel];
  const unsigned gx = unsigned(l.grid[0]), gy = unsigned(l.grid[1]),
                 gz = unsigned(l.grid[2]), threads = unsigned(l.blockThreads),
                 shared =
                     unsigned(program_.kernels[l.kernel].dynamicSharedBytes);
  // Not in a timed step: each launch's own time is measured between two
  // events, without overlap.
  if (pdl_ && waits_[l.kernel] && (pdlInGraphs_ || !capturing_) && !timing_) {
    // May start while the kernel before it in the stream (kiln's, or a
    // cuBLAS GEMM's) still runs: it waits for it itself (griddepcontrol.
    // wait) before it reads what that kernel wrote.
    KilnLaunchAttribute attr = {};
    attr.id = kLaunchAttributeProgrammaticStreamSerialization;
    attr.value.programmaticStreamSerializationAllowed = 1;
    KilnLaunchConfig config = {gx, gy,     gz,      threads, 1,
                               1,  shared, stream_, &attr,   1};
    CUresult r = cu_->launchKernelEx(&config, f, params, nullptr);
    if (r == CUDA_SUCCESS)
      return absl::OkStatus();
    // The same launch without the attribute: when it goes, the attribute
    // was what the driver refused (else the error is another's, e.g. an
    // earlier kernel's fault, and is returned).
    KILN_CU(launchKernel(f, gx, gy, gz, threads, 1, 1, shared, stream_, params,
                         nullptr));
    pdl_ = false;
    const char *name = nullptr;
    cu_->getErrorName(r, &name);
    reportPdlOff(absl::StrCat(
        "programmatic dependent launch is off: cuLaunchKernelEx refused it (",
        name ? name : std::to_string(r), ", at ", l.name,
        "); each kernel starts after the one before it"));
    return absl::OkStatus();
  }
  KILN_CU(launchKernel(f, gx, gy, gz, threads, 1, 1, shared, stream_, params,
                       nullptr));
  return absl::OkStatus();
}

void CudaDevice::reportPdlOff(const std::string &why) {
  if (pdlReported_)
    return;
  pdlReported_ = true;
  std::fprintf(stderr, "kiln: cuda device: %s\n", why.c_str());
}

absl::Status CudaDevice::launchTimed(const std::vector<Launch> &launches) {
  // Event i before launch i, event i + 1 after it: no graph, so that each
  // launch's own time is seen (an event costs ~1 us of launch gap, not of
  // the kernel's time).
  while (events_.size() < launches.size() + 1) {
    CUevent e;
    KILN_CU(eventCreate(&e, CU_EVENT_DEFAULT));
    events_.push_back(e);
  }
  KILN_CU(eventRecord(events_[0], stream_));
  for (size_t i = 0; i < launches.size(); ++i) {
    // A launch the step skips: an empty interval, not recorded.
    if (runs(launches[i]))
      if (absl::Status s = launchOne(launches[i]); !s.ok())
        return s;
    KILN_CU(eventRecord(events_[i + 1], stream_));
  }
  KILN_CU(eventSynchronize(events_[launches.size()]));
  for (size_t i = 0; i < launches.size(); ++i) {
    float ms = 0;
    if (!runs(launches[i]))
      continue;
    KILN_CU(eventElapsedTime(&ms, events_[i], events_[i + 1]));
    recordLaunch(launches[i], double(ms) * 1e3);
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::flushCaches() {
  if (!flushBuffer_) {
    int l2 = 0;
    KILN_CU(deviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, gpu_));
    flushBytes_ = 2 * int64_t(std::max(l2, 1 << 20));
    KILN_CU(memAlloc(&flushBuffer_, flushBytes_));
    allocations_.push_back(flushBuffer_);
  }
  // Written, not read: every line of it passes through L2, evicting what
  // was there. On the default stream, which the blocking stream waits for.
  KILN_CU(memsetD8(flushBuffer_, 0, flushBytes_));
  return absl::OkStatus();
}

absl::StatusOr<PlanDevice::Memory> CudaDevice::probe() {
  // A sticky fault (an illegal address) shows at the next synchronize.
  KILN_CU(ctxSynchronize());
  size_t free = 0, total = 0;
  KILN_CU(memGetInfo(&free, &total));
  return Memory{int64_t(free), int64_t(total)};
}

absl::Status CudaDevice::bindThread() {
  KILN_CU(ctxSetCurrent(ctx_));
  return absl::OkStatus();
}

absl::Status CudaDevice::stepFinished(CUresult r, const char *call) const {
  absl::Status s = cu_->check(r, call);
  if (s.ok() || sync_)
    return s;
  // Where a fault of the step's shows without KILN_CUDA_SYNC.
  return absl::Status(s.code(),
                      absl::StrCat(s.message(), ", after the step's launches (",
                                   plan_ ? planName(*plan_) : "no plan yet",
                                   "); KILN_CUDA_SYNC=1 names the launch"));
}

absl::Status CudaDevice::readLogits(int64_t offset, float *out, size_t floats) {
  if (absl::Status s = waitForCollectives(); !s.ok())
    return s;
  // Synchronous on the default stream: the step has finished after it.
  return stepFinished(
      cu_->memcpyDtoH(out, regions_[Region::Arena] + offset, floats * 4),
      "cuMemcpyDtoH");
}

absl::Status CudaDevice::readSampled(int64_t rows) {
  if (absl::Status s = waitForCollectives(); !s.ok())
    return s;
  // Synchronous on the default stream: the step has finished after it.
  return stepFinished(
      cu_->memcpyDtoH(sampled_.data(), regions_[Region::Sampled], rows * 4),
      "cuMemcpyDtoH");
}

absl::Status CudaDevice::joinNccl(NcclGroup *group, int index, int rank,
                                  std::chrono::milliseconds timeout) {
  ncclGroup_ = group;
  comm_ = group->comm(index);
  rank_ = rank;
  collectiveTimeout_ = timeout;
  // The all-gather of more than one row lands rank after rank first.
  int64_t floats = 0;
  for (const auto *plans : {&program_.prefill, &program_.batches})
    for (const StepPlan &plan : *plans)
      for (const Launch &l : plan.launches)
        if (l.kernel == kAllGather)
          floats =
              std::max(floats, plan.rows * l.collectiveCols * program_.ranks);
  if (floats > 0) {
    KILN_CU(memAlloc(&gathered_, floats * 4));
    allocations_.push_back(gathered_);
  }
  return absl::OkStatus();
}

void CudaDevice::joinHostCollective(HostCollective *collective, int rank) {
  hostCollective_ = collective;
  rank_ = rank;
  useGraphs_ = false; // a capture cannot wait for the host
}

int64_t CudaDevice::collectiveRows() const {
  if (!capturing_)
    return count_[0];
  if (plan_ == &program_.decode)
    return 1;
  for (const auto *plans : {&program_.prefill, &program_.batches})
    for (const StepPlan &plan : *plans)
      if (plan_ == &plan.launches)
        return plan.rows;
  return count_[0];
}

absl::Status
CudaDevice::enqueueCollective(const Launch &l,
                              const std::vector<CUdeviceptr> &args) {
  const bool reduce = l.kernel == kAllReduce;
  const int64_t rows = collectiveRows(), cols = l.collectiveCols;
  const int64_t ranks = program_.ranks;
  if (hostCollective_) {
    // Through host memory: the step so far finishes first.
    KILN_CU(streamSynchronize(stream_));
    if (reduce) {
      std::vector<uint16_t> input(rows * cols), residual, out(rows * cols);
      KILN_CU(memcpyDtoH(input.data(), args.front(), input.size() * 2));
      if (args.size() == 3) {
        residual.resize(rows * cols);
        KILN_CU(memcpyDtoH(residual.data(), args[1], residual.size() * 2));
      }
      if (absl::Status s = hostCollective_->allReduce(
              rank_, input.data(), residual.empty() ? nullptr : residual.data(),
              out.data(), rows * cols);
          !s.ok())
        return s;
      KILN_CU(memcpyHtoD(args.back(), out.data(), out.size() * 2));
    } else {
      std::vector<float> input(rows * cols), out(rows * ranks * cols);
      KILN_CU(memcpyDtoH(input.data(), args[0], input.size() * 4));
      if (absl::Status s = hostCollective_->allGather(rank_, input.data(),
                                                      out.data(), rows, cols);
          !s.ok())
        return s;
      KILN_CU(memcpyHtoD(args[1], out.data(), out.size() * 4));
    }
    return absl::OkStatus();
  }
  if (!ncclGroup_)
    return absl::FailedPreconditionError(
        "cuda device: a collective in the plan of a device that is no rank");
  if (ncclGroup_->aborted())
    return absl::AbortedError(absl::StrCat(
        "rank ", rank_, ": its NCCL communicator was aborted by a failure"));
  NcclRank r{&ncclGroup_->nccl(), cu_,     blas_,    blasHandle_, comm_, rank_,
             int(ranks),          stream_, gathered_};
  if (reduce)
    return ncclAllReduceF16(r, args.front(), args.size() == 3 ? args[1] : 0,
                            args.back(), rows * cols);
  return ncclAllGatherF32(r, args[0], args[1], rows, cols);
}

absl::Status CudaDevice::waitForCollectives() {
  if (!ncclGroup_)
    return absl::OkStatus();
  const Nccl &nccl = ncclGroup_->nccl();
  const auto deadline = std::chrono::steady_clock::now() + collectiveTimeout_;
  for (;;) {
    if (ncclGroup_->aborted())
      return absl::AbortedError(absl::StrCat(
          "rank ", rank_, ": its NCCL communicator was aborted by a failure"));
    CUresult r = cu_->streamQuery(stream_);
    if (r == CUDA_SUCCESS)
      return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY)
      return stepFinished(r, "cuStreamQuery");
    ncclResult_t async = ncclSuccess;
    nccl.commGetAsyncError(comm_, &async);
    absl::Status failed;
    if (async != ncclSuccess && async != ncclInProgress)
      failed = nccl.check(async, "NCCL");
    else if (std::chrono::steady_clock::now() > deadline)
      failed = absl::DeadlineExceededError(absl::StrCat(
          "the step's collectives did not finish within ",
          collectiveTimeout_.count(), " ms (a rank that died or hangs)"));
    if (!failed.ok()) {
      failed = absl::Status(
          failed.code(), absl::StrCat("rank ", rank_, ": ", failed.message()));
      // Every communicator of the process: no rank waits on.
      ncclGroup_->abort(rank_, failed);
      return failed;
    }
    std::this_thread::yield();
  }
}

} // namespace kiln
