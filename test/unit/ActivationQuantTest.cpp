// The W8A8 activation rule on the host (runtime/ActivationQuant.h) against
// codes and scales torch computed (test/fixtures/quant/
// act-quant-cases.safetensors, made by test/fixtures/make_act_quant_cases.py
// with make_w8a8_fixture.py's rule): every row's e4m3 codes (ties to even,
// -0 as 0x80, subnormal codes, rows whose 448 / amax torch rounds twice) and
// its f32 scale bit for bit, and the round trip's values.
#include "runtime/ActivationQuant.h"
#include "runtime/SafeTensors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace kiln {
namespace {

template <typename T> std::vector<T> elements(const TensorView *t) {
  std::vector<T> out(t ? t->numBytes / sizeof(T) : 0);
  if (!out.empty())
    std::memcpy(out.data(), t->data, t->numBytes);
  return out;
}

TEST(ActivationQuant, IsTorchsRuleBitForBit) {
  const char *dir = std::getenv("KILN_FIXTURES");
  std::string path = std::string(dir ? dir : "test/fixtures") +
                     "/quant/act-quant-cases.safetensors";
  auto file = SafeTensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status() << " (KILN_FIXTURES "
                         << (dir ? dir : "unset: run under ctest") << ")";
  const TensorView *x = (*file)->find("x"), *codes = (*file)->find("codes"),
                   *scales = (*file)->find("scales"),
                   *values = (*file)->find("values");
  ASSERT_TRUE(x && codes && scales && values);
  ASSERT_EQ(x->shape.size(), 2u);
  const int64_t rows = x->shape[0], k = x->shape[1];
  std::vector<float> xs = elements<float>(x), want = elements<float>(values),
                     wantScales = elements<float>(scales);
  std::vector<uint8_t> wantCodes = elements<uint8_t>(codes);
  ASSERT_EQ(xs.size(), size_t(rows * k));
  ASSERT_EQ(wantCodes.size(), xs.size());
  ASSERT_EQ(wantScales.size(), size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = xs.data() + r * k;
    std::vector<uint8_t> got(k); // [k]
    float scale = quantizeActivationRow(row, k, got.data());
    uint32_t a, b;
    std::memcpy(&a, &scale, 4);
    std::memcpy(&b, &wantScales[r], 4);
    EXPECT_EQ(a, b) << "row " << r << ": scale " << scale << ", torch's "
                    << wantScales[r];
    int wrong = 0;
    for (int64_t i = 0; i < k; ++i)
      if (got[i] != wantCodes[r * k + i] && wrong++ < 4)
        ADD_FAILURE() << "row " << r << " column " << i << " (x " << row[i]
                      << "): code 0x" << std::hex << int(got[i])
                      << ", torch's 0x" << int(wantCodes[r * k + i]);
    std::vector<float> trip(row, row + k); // [k]
    roundTripActivationRow(trip.data(), k);
    EXPECT_EQ(0, std::memcmp(trip.data(), want.data() + r * k, k * 4))
        << "row " << r << ": the round trip's values differ from torch's";
  }
}

} // namespace
} // namespace kiln
