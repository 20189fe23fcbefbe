//===- NcclApiTest.cpp - kiln's NCCL table against NCCL's own library -----===//
//
// The toolkit's libnccl.so.2 and nccl.h: every function kiln's table names
// resolves (the build already held each one's type to nccl.h), the
// library's version is the header's major version, and the calls that
// need no GPU answer through the table.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/NcclApi.h"
#include "runtime/cuda/CudaRanks.h"

#include <gtest/gtest.h>

using namespace kiln;

TEST(NcclApi, EveryFunctionOfTheLibrary) {
  auto nccl = Nccl::get();
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  const Nccl &n = **nccl;
#define KILN_RESOLVED(member, function, symbol)                                \
  EXPECT_NE(n.member, nullptr) << symbol;
  KILN_NCCL_FUNCTIONS(KILN_RESOLVED)
#undef KILN_RESOLVED
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch (2.9 on).
  int version = n.version();
  EXPECT_EQ(version / 10000, NCCL_MAJOR) << version;
  EXPECT_GE(version, 20900);
}

TEST(NcclApi, ErrorsNameTheCallAndNcclsMessage) {
  auto nccl = Nccl::get();
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_TRUE((*nccl)->check(ncclSuccess, "ncclAllReduce").ok());
  absl::Status s = (*nccl)->check(ncclInvalidArgument, "ncclAllReduce");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("tensor parallelism: ncclAllReduce: invalid "
                             "argument"),
            std::string::npos)
      << s;
  // A call through the table that needs no GPU: NCCL refuses a null
  // argument itself.
  s = (*nccl)->check((*nccl)->getVersion(nullptr), "ncclGetVersion");
  EXPECT_FALSE(s.ok());
}

// Rank 0's unique id for ranks that are processes (kiln-run --rendezvous):
// NCCL makes it without a GPU, 128 bytes that every rank gets as is.
TEST(NcclApi, AUniqueIdForTheRendezvous) {
  auto id = newNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), size_t(NCCL_UNIQUE_ID_BYTES));
  auto other = newNcclUniqueId();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*id, *other);
  // A payload that is not an id (an emu rank 0's) is refused before NCCL.
  auto joined = joinNcclRanks("", 1, 2);
  ASSERT_FALSE(joined.ok());
  EXPECT_NE(joined.status().message().find(
                "rank 0 handed out a 0-byte NCCL unique id, not 128"),
            std::string::npos)
      << joined.status();
}
