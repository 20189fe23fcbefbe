#include "runtime/JsonRead.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using Json = nlohmann::json;

TEST(JsonRead, IntegersThatFitAreRead) {
  EXPECT_EQ(jsonInteger<int>(Json::parse("-7")), -7);
  EXPECT_EQ(jsonInteger<int64_t>(Json::parse("9223372036854775807")),
            INT64_MAX);
  EXPECT_EQ(jsonInteger<uint64_t>(Json::parse("18446744073709551615")),
            UINT64_MAX);
  EXPECT_EQ(jsonIntegers<int64_t>(Json::parse("[1, 2, 3]")),
            (std::vector<int64_t>{1, 2, 3}));
}

TEST(JsonRead, AnythingElseIsRefusedNotCast) {
  // Each of these casts to int is undefined or wraps in nlohmann's get<int>.
  for (const char *text :
       {"8.88889e+114", "1.5", "2147483648", "-2147483649", "true", "\"3\"",
        "null", "[1]", "18446744073709551615"})
    EXPECT_THROW(jsonInteger<int>(Json::parse(text)), std::invalid_argument)
        << text;
  EXPECT_THROW(jsonInteger<int64_t>(Json::parse("9223372036854775808")),
               std::invalid_argument);
  EXPECT_THROW(jsonInteger<uint64_t>(Json::parse("-1")), std::invalid_argument);
  EXPECT_THROW(jsonIntegers<int64_t>(Json::parse("[1, 1e300]")),
               std::invalid_argument);
  EXPECT_THROW(jsonIntegers<int64_t>(Json::parse("{}")), std::invalid_argument);
}

TEST(JsonRead, TheMessageNamesWhatWasFound) {
  try {
    jsonInteger<int>(Json::parse("1e300"));
    FAIL();
  } catch (const std::invalid_argument &e) {
    EXPECT_EQ(jsonErrorMessage(e),
              "expected an integer of at most 32 bits, found 1e+300");
  }
}

} // namespace
} // namespace kiln
