#include "runtime/cuda/CudaDevice.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
std::vector<std::string> whats(const std::vector<KernelImage> &images) {
  std::vector<std::string> out;
  for (const KernelImage &i : images)
    out.push_back(i.what + "=" + i.bytes);
  return out;
}
} // namespace

// The order the cuda device offers a kernel's code to the driver: the GPU's
// CUBIN, then the newest PTX the GPU can compile (a driver older than the
// bundle's NVRTC refuses its CUBIN; its PTX is the next try), then NVRTC.
TEST(KernelImages, CubinThenTheNewestPtxNoNewerThanTheGpu) {
  KernelBinaries cubin = {{"k", {{"sm_80", "c80"}, {"sm_90", "c90"}}}};
  KernelBinaries ptx = {
      {"k", {{"sm_80", "p80"}, {"sm_90", "p90"}, {"sm_100", "p100"}}}};
  EXPECT_EQ(
      whats(kernelImages("k", cubin, ptx, "sm_90")),
      (std::vector<std::string>{"CUBIN for sm_90=c90", "PTX for sm_90=p90"}));
  // A newer GPU than every CUBIN: the newest PTX below it.
  EXPECT_EQ(whats(kernelImages("k", cubin, ptx, "sm_120")),
            (std::vector<std::string>{"PTX for sm_100=p100"}));
  // An older GPU than every target: nothing (NVRTC compiles the source).
  EXPECT_TRUE(kernelImages("k", cubin, ptx, "sm_75").empty());
  EXPECT_TRUE(kernelImages("other", cubin, ptx, "sm_90").empty());
}

TEST(KernelImages, ABundlesTargetNamesAreNotTrusted) {
  KernelBinaries ptx = {
      {"k", {{"sm_x", "bad"}, {"compute_90", "bad"}, {"sm_89", "p89"}}}};
  EXPECT_EQ(whats(kernelImages("k", {}, ptx, "sm_90")),
            (std::vector<std::string>{"PTX for sm_89=p89"}));
}
