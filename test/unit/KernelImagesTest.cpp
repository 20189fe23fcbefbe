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

// Each image carries the PTX it was made from: the cuda device launches a
// kernel with programmatic dependent launch only when that PTX waits for
// the previous grid (griddepcontrol.wait).
TEST(KernelImages, EachImageCarriesThePtxItWasMadeFrom) {
  KernelBinaries cubin = {{"k", {{"sm_90", "c90"}}}};
  KernelBinaries ptx = {{"k", {{"sm_80", "p80"}, {"sm_90", "p90"}}}};
  auto images = kernelImages("k", cubin, ptx, "sm_90");
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].ptx, "p90"); // the CUBIN's compile
  EXPECT_EQ(images[1].ptx, "p90");
  // A CUBIN without the PTX of its compile: none (launched plainly).
  images = kernelImages("k", {{"k", {{"sm_89", "c89"}}}}, ptx, "sm_89");
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].ptx, "");
  EXPECT_EQ(images[1].ptx, "p80");
}

TEST(KernelImages, OnlyPtxThatWaitsForThePreviousGridCountsAsWaiting) {
  EXPECT_TRUE(ptxWaitsForPreviousGrid(
      "\tgriddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;\n"));
  // sm_80's PTX of the same source: the wait compiled out.
  EXPECT_FALSE(ptxWaitsForPreviousGrid("\tld.global.nc.v4.u32 ...\n"));
  EXPECT_FALSE(ptxWaitsForPreviousGrid("griddepcontrol.launch_dependents;"));
  EXPECT_FALSE(ptxWaitsForPreviousGrid(""));
}

TEST(Pdl, OnFromSm90WithCuLaunchKernelExAndCuda12_3) {
  EXPECT_TRUE(choosePdl(nullptr, 9, 12030, true).on);
  EXPECT_TRUE(choosePdl(nullptr, 10, 13000, true).on);
  EXPECT_TRUE(choosePdl("1", 9, 12040, true).on);
  EXPECT_EQ(choosePdl(nullptr, 9, 12030, true).why, "");
  // Off as asked, and before sm_90: nothing to say.
  for (PdlChoice c :
       {choosePdl("0", 9, 13000, true), choosePdl(nullptr, 8, 13000, true),
        choosePdl(nullptr, 7, 11080, false)}) {
    EXPECT_FALSE(c.on);
    EXPECT_EQ(c.why, "");
  }
  // An older driver: off, said in one line.
  PdlChoice old = choosePdl(nullptr, 9, 12020, true);
  EXPECT_FALSE(old.on);
  EXPECT_NE(old.why.find("the driver supports CUDA 12.2, CUDA graphs keep it "
                         "from 12.3 on"),
            std::string::npos)
      << old.why;
  EXPECT_EQ(old.why.find('\n'), std::string::npos);
  PdlChoice missing = choosePdl(nullptr, 9, 12080, false);
  EXPECT_FALSE(missing.on);
  EXPECT_NE(missing.why.find("no cuLaunchKernelEx"), std::string::npos)
      << missing.why;
}
