//===- ProcessRanks.cpp ---------------------------------------------------===//
#include "runtime/ProcessRanks.h"

#include "runtime/EmuDevice.h"
#include "runtime/Hash.h"
#include "runtime/MappedFile.h"
#include "runtime/RemoteRank.h"
#include "runtime/SocketCollective.h"
#include "runtime/TensorParallelDevice.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaRanks.h"

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

/// This process's rank: its device, and what joins it to the others.
struct LocalRank {
  std::unique_ptr<RankLinks> links;
  std::unique_ptr<RankAbort> collective;
  std::unique_ptr<PlanDevice> device;
};

absl::StatusOr<LocalRank> openLocalRank(Bundle &bundle,
                                        const WeightSet *weights,
                                        const ProcessRankOptions &o) {
  const RendezvousOptions &r = o.rendezvous;
  if (bundle.program.ranks != r.worldSize)
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size ", r.worldSize, ": the bundle is split over ",
        bundle.program.ranks, " ranks (kiln compile --tp N)"));
  if (o.device != "emu" && o.device != "cuda")
    return absl::InvalidArgumentError(
        absl::StrCat("--device: '", o.device, "' is not cuda or emu"));
  const bool cuda = o.device == "cuda";
  // Every rank runs the bundle on one kind of device: emu's collectives
  // and NCCL's do not meet.
  RendezvousOptions meet = r;
  meet.digest = absl::StrCat(r.digest, "/", o.device);
  // Rank 0 hands out NCCL's unique id as the ranks meet.
  std::string payload;
  if (cuda && r.rank == 0) {
    auto id = newNcclUniqueId();
    if (!id.ok())
      return id.status();
    payload = *id;
  }
  LocalRank out;
  auto links = rendezvous(meet, payload);
  if (!links.ok())
    return links.status();
  out.links = std::move(*links);
  WeightProvider provider =
      weights ? WeightProvider::checkpoint(*weights, r.rank, r.worldSize)
              : WeightProvider::random(1 + r.rank);
  if (!cuda) {
    auto collective =
        std::make_unique<SocketCollective>(*out.links, o.collectiveTimeout);
    auto dev = EmuDevice::create(bundle.program, provider);
    if (!dev.ok())
      return dev.status();
    (*dev)->joinCollective(collective.get(), r.rank);
    out.device = std::move(*dev);
    out.collective = std::move(collective);
    return out;
  }
  // A process a GPU: rank R on GPU R mod the machine's (CUDA_VISIBLE_DEVICES
  // picks them, as with torchrun).
  auto gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  const CudaDriver *cu = *CudaDriver::get();
  int gpus = 1;
  (void)cu->deviceGetCount(&gpus);
  auto dev =
      CudaDevice::create(bundle.program, bundle.cubin, bundle.ptx, bundle.nvrtc,
                         provider, r.rank % std::max(gpus, 1));
  if (!dev.ok())
    return dev.status();
  auto group = joinNcclRanks(out.links->payload, r.rank, r.worldSize);
  if (!group.ok())
    return group.status();
  if (absl::Status s =
          (*dev)->joinNccl(group->get(), 0, r.rank, o.collectiveTimeout);
      !s.ok())
    return s;
  out.device = std::move(*dev);
  out.collective = std::move(*group);
  return out;
}

} // namespace

absl::StatusOr<std::string> bundleDigest(const std::string &path) {
  auto file = MappedFile::open(path);
  if (!file.ok())
    return file.status();
  return Fnv1a()
      .add({reinterpret_cast<const char *>((*file)->data()), (*file)->size()})
      .hex();
}

absl::StatusOr<std::unique_ptr<PlanDevice>>
openRankZero(Bundle &bundle, const WeightSet *weights,
             const ProcessRankOptions &options) {
  auto local = openLocalRank(bundle, weights, options);
  if (!local.ok())
    return local.status();
  // Remote ranks stop waiting for an answer once a collective failed.
  const std::atomic<bool> *failed = nullptr;
  if (auto *socket = dynamic_cast<SocketCollective *>(local->collective.get()))
    failed = &socket->failed();
  std::vector<std::unique_ptr<PlanDevice>> ranks;
  ranks.push_back(std::move(local->device));
  for (int r = 1; r < options.rendezvous.worldSize; ++r)
    ranks.push_back(std::make_unique<RemoteRank>(
        ranks[0]->program(), *local->links->control[r], failed));
  return std::unique_ptr<PlanDevice>(std::make_unique<TensorParallelDevice>(
      std::move(ranks), std::move(local->collective), std::move(local->links)));
}

absl::Status followAsRank(Bundle &bundle, const WeightSet *weights,
                          const ProcessRankOptions &options) {
  const int rank = options.rendezvous.rank;
  auto local = openLocalRank(bundle, weights, options);
  absl::Status s = local.ok()
                       ? RemoteRank::followRankZero(*local->device, rank,
                                                    *local->links->control[0],
                                                    *local->collective)
                       : local.status();
  if (s.ok())
    return s;
  return absl::Status(s.code(), absl::StrCat("rank ", rank, ": ", s.message()));
}

} // namespace kiln
