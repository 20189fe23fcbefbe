#include "runtime/Isolated.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <unistd.h>

using namespace kiln;

TEST(Isolated, ReturnsTheChildsBytes) {
  std::string big(1 << 20, 'x'); // more than a pipe holds at once
  big[12345] = '\0';
  auto r = runIsolated([&]() -> absl::StatusOr<std::string> { return big; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, big);
}

TEST(Isolated, ReturnsTheChildsError) {
  auto r = runIsolated([]() -> absl::StatusOr<std::string> {
    return absl::NotFoundError("bundle.kiln: cannot read it");
  });
  EXPECT_EQ(r.status(), absl::NotFoundError("bundle.kiln: cannot read it"));
}

TEST(Isolated, NamesHowTheChildDied) {
  // abort(): SIGABRT, which the sanitizers leave alone.
  auto killed =
      runIsolated([]() -> absl::StatusOr<std::string> { std::abort(); });
  EXPECT_EQ(killed.status().message(),
            "its process died of signal 6 (Aborted)");
  auto exited =
      runIsolated([]() -> absl::StatusOr<std::string> { ::_exit(7); });
  EXPECT_EQ(exited.status().message(),
            "its process exited with status 7 before answering");
}

TEST(Isolated, TheParentsStateIsUntouched) {
  int counter = 1;
  auto r = runIsolated([&]() -> absl::StatusOr<std::string> {
    counter = 99; // the child's copy
    return std::to_string(counter);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "99");
  EXPECT_EQ(counter, 1);
}
