//===- CudaRanks.cpp ------------------------------------------------------===//
#include "runtime/cuda/CudaRanks.h"

#include "runtime/InProcessCollective.h"
#include "runtime/cuda/CudaDevice.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <cstring>
#include <numeric>

namespace kiln {

absl::StatusOr<std::unique_ptr<TensorParallelDevice>>
openCudaRanks(const Bundle &bundle, const WeightSet *weights,
              std::chrono::milliseconds timeout) {
  const int ranks = int(bundle.program.ranks);
  const char *mode = std::getenv("KILN_TP_COLLECTIVE");
  const bool host = mode && std::strcmp(mode, "host") == 0;
  if (mode && !host && std::strcmp(mode, "nccl") != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("KILN_TP_COLLECTIVE: '", mode, "' is not nccl or host"));
  auto gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  const CudaDriver *cu = *CudaDriver::get();
  int gpus = 0;
  if (absl::Status s = cu->check(cu->deviceGetCount(&gpus), "cuDeviceGetCount");
      !s.ok())
    return s;
  if (!host && gpus < ranks)
    return absl::FailedPreconditionError(absl::StrCat(
        "a model split over ", ranks, " ranks needs ", ranks,
        " GPUs for NCCL; this machine has ", gpus,
        " (KILN_TP_COLLECTIVE=host runs the ranks on shared GPUs through "
        "host memory, for checks)"));
  std::unique_ptr<RankAbort> collective;
  InProcessCollective *hostCollective = nullptr;
  NcclGroup *group = nullptr;
  const Nccl *nccl = nullptr;
  if (host) {
    auto c = std::make_unique<InProcessCollective>(ranks, timeout);
    hostCollective = c.get();
    collective = std::move(c);
  } else {
    auto opened = Nccl::get();
    if (!opened.ok())
      return opened.status();
    nccl = *opened;
    std::vector<int> devices(ranks);
    std::iota(devices.begin(), devices.end(), 0);
    std::vector<ncclComm_t> comms(ranks);
    if (absl::Status s =
            nccl->check(nccl->commInitAll(comms.data(), ranks, devices.data()),
                        "ncclCommInitAll");
        !s.ok())
      return s;
    auto g = std::make_unique<NcclGroup>(nccl, std::move(comms));
    group = g.get();
    collective = std::move(g);
  }
  std::vector<std::unique_ptr<PlanDevice>> devices;
  for (int r = 0; r < ranks; ++r) {
    auto dev = CudaDevice::create(
        bundle.program, bundle.cubin, bundle.ptx, bundle.nvrtc,
        weights ? WeightProvider::checkpoint(*weights, r, ranks)
                : WeightProvider::random(1 + r),
        r % gpus);
    if (!dev.ok())
      return absl::Status(
          dev.status().code(),
          absl::StrCat("rank ", r, ": ", dev.status().message()));
    if (host) {
      (*dev)->joinHostCollective(hostCollective, r);
    } else if (absl::Status s = (*dev)->joinNccl(group, r, r, timeout);
               !s.ok()) {
      return s;
    }
    devices.push_back(std::move(*dev));
  }
  return std::make_unique<TensorParallelDevice>(std::move(devices),
                                                std::move(collective));
}

absl::StatusOr<std::string> newNcclUniqueId() {
  auto nccl = Nccl::get();
  if (!nccl.ok())
    return nccl.status();
  ncclUniqueId id;
  if (absl::Status s =
          (*nccl)->check((*nccl)->getUniqueId(&id), "ncclGetUniqueId");
      !s.ok())
    return s;
  return std::string(id.internal, sizeof id.internal);
}

absl::StatusOr<std::unique_ptr<NcclGroup>>
joinNcclRanks(const std::string &uniqueId, int rank, int ranks) {
  auto nccl = Nccl::get();
  if (!nccl.ok())
    return nccl.status();
  ncclUniqueId id;
  if (uniqueId.size() != sizeof id.internal)
    return absl::DataLossError(absl::StrCat(
        "rank 0 handed out a ", uniqueId.size(), "-byte NCCL unique id, not ",
        sizeof id.internal, " (is it a cuda rank?)"));
  std::memcpy(id.internal, uniqueId.data(), sizeof id.internal);
  ncclComm_t comm = nullptr;
  if (absl::Status s = (*nccl)->check(
          (*nccl)->commInitRank(&comm, ranks, id, rank), "ncclCommInitRank");
      !s.ok())
    return s;
  return std::make_unique<NcclGroup>(*nccl, std::vector<ncclComm_t>{comm});
}

} // namespace kiln
