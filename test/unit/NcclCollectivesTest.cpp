//===- NcclCollectivesTest.cpp - a cuda rank's collectives, call by call --===//
//
// The library calls a cuda rank of a split model makes for its plans'
// collectives (runtime/cuda/NcclCollectives.h), through tables whose
// functions record their arguments (typed by nccl.h, cuda.h and kiln's
// cuBLAS declarations, so a call that does not fit the libraries' own
// signatures does not build): the residual added once, by rank 0 only, in
// f32; NCCL's sum and gather with their counts and types; and the copies
// that put a gather of several rows into [rows, ranks * cols].
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/NcclCollectives.h"

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>

#include <vector>

using namespace kiln;

namespace {

std::vector<std::string> calls; // what the fake libraries were asked

std::string hex(const void *p) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p)));
}

struct FakeLibraries {
  Nccl nccl = {};
  CudaDriver cu = {};
  Cublas blas = {};
  NcclRank rank(int r, int ranks) {
    NcclRank out;
    out.nccl = &nccl;
    out.cu = &cu;
    out.blas = &blas;
    out.blasHandle = reinterpret_cast<Cublas::Handle>(0xb1a5);
    out.comm = reinterpret_cast<ncclComm_t>(0xc033);
    out.rank = r;
    out.ranks = ranks;
    out.stream = reinterpret_cast<CUstream>(0x5e);
    out.gathered = 0x9000;
    return out;
  }
  FakeLibraries() {
    calls.clear();
    nccl.allReduce = [](const void *in, void *out, size_t n, ncclDataType_t t,
                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t s) {
      calls.push_back(absl::StrCat("ncclAllReduce ", hex(in), " -> ", hex(out),
                                   " n=", n, " type=", int(t), " op=", int(op),
                                   " comm=", hex(comm), " stream=", hex(s)));
      return ncclSuccess;
    };
    nccl.allGather = [](const void *in, void *out, size_t n, ncclDataType_t t,
                        ncclComm_t comm, cudaStream_t s) {
      calls.push_back(absl::StrCat("ncclAllGather ", hex(in), " -> ", hex(out),
                                   " n=", n, " type=", int(t),
                                   " comm=", hex(comm), " stream=", hex(s)));
      return ncclSuccess;
    };
    nccl.getErrorString = [](ncclResult_t) { return "fake"; };
    blas.axpyEx = [](Cublas::Handle h, int n, const void *alpha, int alphaType,
                     const void *x, int xType, int incx, void *y, int yType,
                     int incy, int exec) {
      calls.push_back(
          absl::StrCat("cublasAxpyEx handle=", hex(h), " n=", n,
                       " alpha=", *static_cast<const float *>(alpha),
                       " types=", alphaType, ",", xType, ",", yType, ",", exec,
                       " x=", hex(x), " y=", hex(y), " inc=", incx, ",", incy));
      return 0;
    };
    cu.memcpy2DAsync = [](const CUDA_MEMCPY2D *c, CUstream s) {
      calls.push_back(absl::StrCat("cuMemcpy2DAsync ", c->srcDevice, "+",
                                   c->srcPitch, " -> ", c->dstDevice, "+",
                                   c->dstPitch, " ", c->WidthInBytes, "x",
                                   c->Height, " stream=", hex(s)));
      return CUDA_SUCCESS;
    };
  }
};

} // namespace

TEST(NcclCollectives, TheResidualIsAddedOnceByRankZeroThenNcclSums) {
  FakeLibraries libs;
  // Rank 0: the residual into its input (f32 arithmetic on f16 data), then
  // the sum in place of the result.
  ASSERT_TRUE(
      ncclAllReduceF16(libs.rank(0, 4), 0x1000, 0x2000, 0x3000, 8192).ok());
  // Another rank: the sum only.
  ASSERT_TRUE(
      ncclAllReduceF16(libs.rank(3, 4), 0x1000, 0x2000, 0x3000, 8192).ok());
  // No residual: the sum only, on rank 0 too.
  ASSERT_TRUE(ncclAllReduceF16(libs.rank(0, 4), 0x1000, 0, 0x3000, 16).ok());
  const std::string sum =
      absl::StrCat(" type=", int(ncclHalf), " op=", int(ncclSum),
                   " comm=0xc033 stream=0x5e");
  std::vector<std::string> want = {
      "cublasAxpyEx handle=0xb1a5 n=8192 alpha=1 types=0,2,2,0 x=0x2000 "
      "y=0x1000 inc=1,1",
      "ncclAllReduce 0x1000 -> 0x3000 n=8192" + sum,
      "ncclAllReduce 0x1000 -> 0x3000 n=8192" + sum,
      "ncclAllReduce 0x1000 -> 0x3000 n=16" + sum};
  EXPECT_EQ(calls, want);
}

TEST(NcclCollectives, AGatherOfRowsLandsInTheirColumns) {
  FakeLibraries libs;
  // One row (decode): NCCL's order is the plan's.
  ASSERT_TRUE(ncclAllGatherF32(libs.rank(1, 2), 0x1000, 0x4000, 1, 160).ok());
  // Three rows of 160 columns over 2 ranks: gathered [2, 3, 160], then each
  // rank's [3, 160] into its columns of [3, 320].
  ASSERT_TRUE(ncclAllGatherF32(libs.rank(1, 2), 0x1000, 0x4000, 3, 160).ok());
  const std::string gather =
      absl::StrCat(" type=", int(ncclFloat), " comm=0xc033 stream=0x5e");
  std::vector<std::string> want = {
      "ncclAllGather 0x1000 -> 0x4000 n=160" + gather,
      "ncclAllGather 0x1000 -> 0x9000 n=480" + gather,
      // src 0x9000 (rank 0's rows), pitch 640; dst 0x4000, pitch 1280.
      "cuMemcpy2DAsync 36864+640 -> 16384+1280 640x3 stream=0x5e",
      // rank 1's rows at 0x9000 + 3 * 640, into columns 160.. (+640 bytes).
      "cuMemcpy2DAsync 38784+640 -> 17024+1280 640x3 stream=0x5e"};
  EXPECT_EQ(calls, want);
}

TEST(NcclCollectives, NcclsErrorsNameTheCall) {
  FakeLibraries libs;
  libs.nccl.allReduce = [](const void *, void *, size_t, ncclDataType_t,
                           ncclRedOp_t, ncclComm_t,
                           cudaStream_t) { return ncclRemoteError; };
  absl::Status s = ncclAllReduceF16(libs.rank(1, 2), 0x1000, 0, 0x3000, 8);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ncclAllReduce: fake"), std::string::npos) << s;
}

TEST(NcclCollectives, AGroupAbortsEveryCommunicatorOnceAndDestroysNoneAfter) {
  FakeLibraries libs;
  libs.nccl.commAbort = [](ncclComm_t c) {
    calls.push_back("ncclCommAbort " + hex(c));
    return ncclSuccess;
  };
  libs.nccl.commDestroy = [](ncclComm_t c) {
    calls.push_back("ncclCommDestroy " + hex(c));
    return ncclSuccess;
  };
  auto a = reinterpret_cast<ncclComm_t>(0xa),
       b = reinterpret_cast<ncclComm_t>(0xb);
  { NcclGroup group(&libs.nccl, {a, b}); }
  EXPECT_EQ(calls, (std::vector<std::string>{"ncclCommDestroy 0xa",
                                             "ncclCommDestroy 0xb"}));
  calls.clear();
  {
    NcclGroup group(&libs.nccl, {a, b});
    EXPECT_FALSE(group.aborted());
    group.abort(1, absl::DeadlineExceededError("rank 1: too long"));
    group.abort(0, absl::AbortedError("rank 0: too"));
    EXPECT_TRUE(group.aborted());
  }
  EXPECT_EQ(calls, (std::vector<std::string>{"ncclCommAbort 0xa",
                                             "ncclCommAbort 0xb"}));
}
