// kiln's round-to-nearest quantizer and the e4m3 conversions against codes,
// scales, zero points and values that numpy and torch computed
// (test/fixtures/quant/rtn-cases.safetensors, made by
// test/fixtures/make_quant_fixture.py --cases; the rule is in its docstring).
#include "runtime/QuantFormat.h"
#include "runtime/SafeTensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// Every format the cases hold (those of test/fixtures/quant that divide 256).
const char *const kFormats[] = {
    "int8",         "int8-g32",     "int4",         "int4-g32",    "int4-g64",
    "int4-g128",    "int4-g32-zp",  "int4-g128-zp", "int8-zp",     "fp8",
    "int4-g32-min", "int4-g64-min", "int8-g16-min", "int8-g32-min"};
const char *const kCases[] = {"varied", "ties", "edge"};

std::string casesError;

/// The cases' file, or nullptr (with casesError) when it does not open.
const SafeTensorsFile *casesFile() {
  static std::unique_ptr<SafeTensorsFile> file = [] {
    const char *dir = std::getenv("KILN_FIXTURES");
    std::string path = std::string(dir ? dir : "test/fixtures") +
                       "/quant/rtn-cases.safetensors";
    auto f = SafeTensorsFile::open(path);
    if (f.ok())
      return std::move(*f);
    casesError = std::string(f.status().message()) + " (KILN_FIXTURES " +
                 (dir ? dir : "unset: run under ctest") + ")";
    return std::unique_ptr<SafeTensorsFile>();
  }();
  return file.get();
}

const SafeTensorsFile &cases() { return *casesFile(); }

#define REQUIRE_CASES() ASSERT_NE(casesFile(), nullptr) << casesError

const TensorView &tensor(const std::string &name) {
  const TensorView *t = cases().find(name);
  if (!t) {
    ADD_FAILURE() << "rtn-cases.safetensors has no " << name;
    static const TensorView none{"", DType::U8, {0}, nullptr, 0};
    return none;
  }
  return *t;
}

template <typename T>
std::vector<T> elements(const TensorView &t, DType dtype) {
  EXPECT_EQ(t.dtype, dtype) << t.name;
  std::vector<T> out(t.numBytes / sizeof(T));
  if (t.numBytes)
    std::memcpy(out.data(), t.data, t.numBytes);
  return out;
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

std::string hex(unsigned v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

/// Mismatches of got vs want, the first few spelled out with [row, col].
template <typename T, typename Show>
void expectSame(const std::vector<T> &got, const std::vector<T> &want,
                int64_t cols, const std::string &what, Show show) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && bad++ < 5)
      first << "\n  [" << int64_t(i) / cols << ", " << int64_t(i) % cols
            << "]: kiln " << show(got[i], i) << ", expected "
            << show(want[i], i);
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ"
                    << first.str();
}

std::vector<uint32_t> floatBits(const std::vector<float> &v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = bitsOf(v[i]);
  return out;
}

} // namespace

TEST(QuantFormat, NamesRoundTrip) {
  for (const char *name : kFormats) {
    auto f = QuantFormat::parse(name);
    ASSERT_TRUE(f.has_value()) << name;
    EXPECT_EQ(f->name(), name);
    EXPECT_EQ(QuantFormat::parse(f->name()), f) << name;
  }
  auto f = QuantFormat::parse("int4-g128-zp");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, QuantKind::Int4);
  EXPECT_EQ(f->group, 128);
  EXPECT_TRUE(f->zeroPoints);
  EXPECT_EQ(f->bits(), 4);
  EXPECT_EQ(f->middle(), 8);
  EXPECT_EQ(f->groups(256), 2);
  f = QuantFormat::parse("int8");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, QuantKind::Int8);
  EXPECT_EQ(f->group, 0);
  EXPECT_FALSE(f->zeroPoints);
  EXPECT_EQ(f->middle(), 128);
  EXPECT_EQ(f->groups(256), 1);
  f = QuantFormat::parse("int8-zp");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->group, 0);
  EXPECT_TRUE(f->zeroPoints);
  f = QuantFormat::parse("fp8");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, QuantKind::FP8);
  EXPECT_EQ(f->group, 0);
  EXPECT_FALSE(f->zeroPoints);
  for (QuantFormat q : {QuantFormat{QuantKind::Int8, 64, false},
                        QuantFormat{QuantKind::Int8, 128, true},
                        QuantFormat{QuantKind::Int4, 0, true},
                        QuantFormat{QuantKind::Int4, 4096, false}})
    EXPECT_EQ(QuantFormat::parse(q.name()), q) << q.name();
}

TEST(QuantFormat, ParseRejectsBadSpellings) {
  for (const char *bad : {"int4-g0",
                          "int4-gx",
                          "fp8-g32",
                          "int3",
                          "int4-zp-g32",
                          "",
                          "int4-g",
                          "int4-g-32",
                          "int4-g+32",
                          "int4-g32x",
                          "int4-g32-zp-zp",
                          "int4-zp-zp",
                          "fp8-zp",
                          "fp8-g32-zp",
                          "INT8",
                          "int8 ",
                          " int8",
                          "int16",
                          "int4g32",
                          "int4-",
                          "fp8-",
                          "fp16",
                          "int4-min",
                          "int4-g32-zp-min",
                          "int4-g32-min-zp",
                          "fp8-min",
                          "int4-g32-min-act",
                          "int8-min"})
    EXPECT_FALSE(QuantFormat::parse(bad).has_value()) << '"' << bad << '"';
}

TEST(QuantFormat, E4m3ToFloatMatchesTorchForAllCodes) {
  REQUIRE_CASES();
  auto want = elements<float>(tensor("e4m3.values"), DType::F32);
  ASSERT_EQ(want.size(), 256u);
  for (int c = 0; c < 256; ++c) {
    float got = e4m3ToFloat(uint8_t(c));
    if (std::isnan(want[c]))
      EXPECT_TRUE(std::isnan(got)) << hex(c) << ": " << got;
    else
      EXPECT_EQ(bitsOf(got), bitsOf(want[c]))
          << hex(c) << ": kiln " << got << ", torch " << want[c];
    if (!std::isnan(want[c])) // every finite code converts back to itself
      EXPECT_EQ(floatToE4m3(want[c]), c) << hex(c);
  }
}

TEST(QuantFormat, FloatToE4m3MatchesTorch) {
  REQUIRE_CASES();
  auto x = elements<float>(tensor("e4m3.inputs"), DType::F32);
  auto want = elements<uint8_t>(tensor("e4m3.codes"), DType::U8);
  ASSERT_EQ(x.size(), want.size());
  ASSERT_GT(x.size(), 1000u);
  std::vector<uint8_t> got(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    got[i] = floatToE4m3(x[i]);
  expectSame(got, want, int64_t(x.size()), "floatToE4m3",
             [&](uint8_t c, size_t i) {
               std::ostringstream s;
               s.precision(9);
               s << hex(c) << " (of " << x[i] << ")";
               return s.str();
             });
}

TEST(QuantFormat, RoundToNearestMatchesPython) {
  REQUIRE_CASES();
  int checked = 0;
  for (const char *caseName : kCases) {
    const TensorView &in = tensor(std::string("input.") + caseName);
    ASSERT_EQ(in.shape.size(), 2u);
    const int64_t rows = in.shape[0], cols = in.shape[1];
    std::vector<float> w(rows * cols);
    in.toFloat(w.data());
    for (const char *fmtName : kFormats) {
      SCOPED_TRACE(std::string(caseName) + " " + fmtName);
      const std::string key = std::string(caseName) + "." + fmtName;
      auto fmt = QuantFormat::parse(fmtName);
      ASSERT_TRUE(fmt);
      const int64_t groups = fmt->groups(cols);
      QuantizedMatrix q = quantizeRoundToNearest(w.data(), rows, cols, *fmt);
      EXPECT_EQ(q.format, *fmt);
      EXPECT_EQ(q.rows, rows);
      EXPECT_EQ(q.cols, cols);
      EXPECT_TRUE(q.gIdx.empty());

      const TensorView &codesT = tensor(key + ".codes");
      EXPECT_EQ(codesT.shape, (std::vector<int64_t>{rows, cols}));
      auto wantCodes = elements<uint8_t>(codesT, DType::U8);
      auto showCode = [&](uint8_t c, size_t i) {
        std::ostringstream s;
        s.precision(9);
        s << int(c) << " (x = " << w[i] << ")";
        return s.str();
      };
      auto showBits = [](uint32_t b, size_t) {
        float f;
        std::memcpy(&f, &b, 4);
        std::ostringstream s;
        s.precision(9);
        s << f << " (" << hex(b) << ")";
        return s.str();
      };
      expectSame(q.codes, wantCodes, cols, key + ".codes", showCode);
      std::vector<uint16_t> wantScales;
      std::vector<float> wantWide, wantMins;
      if (fmt->mins) { // f32 scales and mins, bit for bit (-0.0 too)
        const TensorView &wideT = tensor(key + ".wide_scales");
        const TensorView &minsT = tensor(key + ".mins");
        EXPECT_EQ(wideT.shape, (std::vector<int64_t>{rows, groups}));
        EXPECT_EQ(minsT.shape, (std::vector<int64_t>{rows, groups}));
        wantWide = elements<float>(wideT, DType::F32);
        wantMins = elements<float>(minsT, DType::F32);
        expectSame(floatBits(q.wideScales), floatBits(wantWide), groups,
                   key + ".wide_scales", showBits);
        expectSame(floatBits(q.mins), floatBits(wantMins), groups,
                   key + ".mins", showBits);
        EXPECT_EQ(cases().find(key + ".scales"), nullptr);
        EXPECT_TRUE(q.scales.empty());
      } else {
        const TensorView &scalesT = tensor(key + ".scales");
        EXPECT_EQ(scalesT.shape, (std::vector<int64_t>{rows, groups}));
        wantScales = elements<uint16_t>(scalesT, DType::F16);
        auto showScale = [](uint16_t h, size_t) {
          std::ostringstream s;
          s.precision(9);
          s << hex(h) << " (" << halfToFloat(h) << ")";
          return s.str();
        };
        expectSame(q.scales, wantScales, groups, key + ".scales", showScale);
      }
      std::vector<uint8_t> wantZeros;
      if (fmt->zeroPoints) {
        const TensorView &zerosT = tensor(key + ".zeros");
        EXPECT_EQ(zerosT.shape, (std::vector<int64_t>{rows, groups}));
        wantZeros = elements<uint8_t>(zerosT, DType::U8);
        expectSame(q.zeros, wantZeros, groups, key + ".zeros",
                   [](uint8_t z, size_t) { return std::to_string(z); });
      } else {
        EXPECT_EQ(cases().find(key + ".zeros"), nullptr);
        EXPECT_TRUE(q.zeros.empty());
      }

      // kiln's dequantization of its own codes, and of the file's (so a
      // quantizer bug does not hide a dequantizer one), is Python's, bit
      // for bit.
      const TensorView &valuesT = tensor(key + ".values");
      EXPECT_EQ(valuesT.shape, (std::vector<int64_t>{rows, cols}));
      auto want = floatBits(elements<float>(valuesT, DType::F32));
      std::vector<float> got(rows * cols);
      q.dequantize(got.data());
      expectSame(floatBits(got), want, cols, key + ".values (kiln's codes)",
                 showBits);
      QuantizedMatrix file;
      file.format = *fmt;
      file.rows = rows;
      file.cols = cols;
      file.codes = wantCodes;
      file.scales = wantScales;
      file.zeros = wantZeros;
      file.wideScales = wantWide;
      file.mins = wantMins;
      if (file.codes.size() == size_t(rows * cols) &&
          (fmt->mins ? file.wideScales.size() : file.scales.size()) ==
              size_t(rows * groups) &&
          file.mins.size() == size_t(fmt->mins ? rows * groups : 0) &&
          file.zeros.size() == size_t(fmt->zeroPoints ? rows * groups : 0)) {
        file.dequantize(got.data());
        expectSame(floatBits(got), want, cols,
                   key + ".values (the file's codes)", showBits);
        for (int64_t i = 0; i < rows * cols; i += 37)
          EXPECT_EQ(bitsOf(file.value(i / cols, i % cols)), want[i]) << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, int(std::size(kCases) * std::size(kFormats)));

  // Nothing in the file goes unchecked: every tensor is one of the above.
  std::set<std::string> known = {"e4m3.values", "e4m3.inputs", "e4m3.codes"};
  for (const char *caseName : kCases) {
    known.insert(std::string("input.") + caseName);
    for (const char *fmtName : kFormats)
      for (const char *part :
           {".codes", ".scales", ".zeros", ".wide_scales", ".mins", ".values"})
        known.insert(std::string(caseName) + "." + fmtName + part);
  }
  for (const auto &[name, t] : cases().tensors())
    EXPECT_TRUE(known.count(name)) << "unchecked tensor " << name;
}

// A tensor-parallel rank's slice (docs/tensor-parallel.md): every value of
// a row slice or of a slice of whole groups of columns is the whole
// matrix's, for every format (scales, zero points, mins and all).
TEST(QuantFormat, SlicesKeepTheWholeMatrixsValues) {
  const int64_t rows = 6, cols = 128;
  std::vector<float> w(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i)
    w[i] = std::sin(0.37f * float(i)) * (1.0f + float(i % 7));
  for (const char *name : {"int8", "int4-g32", "int4-g32-zp", "fp8",
                           "int4-g32-min", "int8-g16-min", "int4"}) {
    SCOPED_TRACE(name);
    auto f = QuantFormat::parse(name);
    ASSERT_TRUE(f);
    QuantizedMatrix q = quantizeRoundToNearest(w.data(), rows, cols, *f);
    QuantizedMatrix top = q.rowSlice(2, 3);
    ASSERT_EQ(top.rows, 3);
    ASSERT_EQ(top.cols, cols);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(top.value(r, c), q.value(r + 2, c)) << r << ", " << c;
    QuantizedMatrix right = q.columnSlice(64, 64);
    ASSERT_EQ(right.rows, rows);
    ASSERT_EQ(right.cols, 64);
    ASSERT_EQ(right.codes.size(), size_t(rows * 64));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < 64; ++c)
        ASSERT_EQ(right.value(r, c), q.value(r, c + 64)) << r << ", " << c;
  }
}
