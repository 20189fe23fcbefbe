//===- QuantFormat.cpp ----------------------------------------------------===//
#include "runtime/QuantFormat.h"
#include "runtime/DType.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kiln {

std::string QuantFormat::name() const {
  if (kind == QuantKind::FP8)
    return "fp8";
  std::string s = kind == QuantKind::Int4 ? "int4" : "int8";
  if (group)
    s += "-g" + std::to_string(group);
  if (zeroPoints)
    s += "-zp";
  if (mins)
    s += "-min";
  if (actOrder)
    s += "-act";
  return s;
}

std::optional<QuantFormat> QuantFormat::parse(std::string_view text) {
  QuantFormat f;
  if (text == "fp8") {
    f.kind = QuantKind::FP8;
    return f;
  }
  if (text.starts_with("int4"))
    f.kind = QuantKind::Int4;
  else if (!text.starts_with("int8"))
    return std::nullopt;
  text.remove_prefix(4);
  if (text.starts_with("-g")) {
    text.remove_prefix(2);
    auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), f.group);
    if (ec != std::errc() || f.group <= 0 || end == text.data())
      return std::nullopt;
    text.remove_prefix(end - text.data());
  }
  if (text.starts_with("-zp")) {
    f.zeroPoints = true;
    text.remove_prefix(3);
  }
  if (text.starts_with("-min") && !f.zeroPoints && f.group) {
    f.mins = true;
    text.remove_prefix(4);
  }
  if (text == "-act" && f.group && !f.mins) {
    f.actOrder = true;
    text = {};
  }
  if (!text.empty())
    return std::nullopt;
  return f;
}

const char *quantFormatChoices() {
  return "int8, int4, int4-g32, int4-g64, int4-g128, int8-gN, any of "
         "them with -zp (zero points), int4-gN-min or int8-gN-min (f32 "
         "scales and mins), or fp8";
}

float e4m3ToFloat(uint8_t bits) {
  int sign = bits >> 7, exp = (bits >> 3) & 0xf, mant = bits & 7;
  float v;
  if (exp == 0xf && mant == 7)
    v = NAN;
  else if (exp == 0)
    v = std::ldexp(float(mant), -9); // subnormal: mant/8 * 2^-6
  else
    v = std::ldexp(float(8 + mant), exp - 10); // (1 + mant/8) * 2^(exp-7)
  return sign ? -v : v;
}

uint8_t floatToE4m3(float f) {
  if (std::isnan(f))
    return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.0f)
    return sign | 0x7e; // satfinite
  // The nearest of the 127 finite magnitudes, ties to the even code: the
  // codes are ordered as their values, so search them.
  uint8_t lo = 0, hi = 0x7e; // e4m3ToFloat(lo) <= a < e4m3ToFloat(hi)
  while (hi - lo > 1) {
    uint8_t mid = uint8_t((lo + hi) / 2);
    (e4m3ToFloat(mid) <= a ? lo : hi) = mid;
  }
  float dl = a - e4m3ToFloat(lo), dh = e4m3ToFloat(hi) - a;
  uint8_t code = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
  return sign | code;
}

float QuantizedMatrix::value(int64_t r, int64_t c) const {
  int64_t g = groupOf(c);
  if (format.mins) // two roundings, no fused multiply-add (-ffp-contract=off)
    return float(codes[r * cols + c]) * wideScales[r * groups() + g] -
           mins[r * groups() + g];
  float scale = halfToFloat(scales[r * groups() + g]);
  uint8_t code = codes[r * cols + c];
  if (format.kind == QuantKind::FP8)
    return e4m3ToFloat(code) * scale;
  int zero = format.zeroPoints ? zeros[r * groups() + g] : format.middle();
  return float(int(code) - zero) * scale;
}

void QuantizedMatrix::dequantize(float *out) const {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = value(r, c);
}

namespace {
/// Round half to even, as the default rounding mode and numpy's round do.
float rne(float x) { return std::nearbyint(x); }

/// float32 -> nearest f16 -> float32.
float toHalf(float x, uint16_t &bits) {
  bits = floatToHalf(x);
  return halfToFloat(bits);
}
} // namespace

QuantizedMatrix QuantizedMatrix::rowSlice(int64_t first, int64_t count) const {
  QuantizedMatrix out;
  out.format = format;
  out.rows = count;
  out.cols = cols;
  out.gIdx = gIdx;
  auto rowsOf = [&](const auto &v, auto &to, int64_t width) {
    if (!v.empty())
      to.assign(v.begin() + first * width, v.begin() + (first + count) * width);
  };
  rowsOf(codes, out.codes, cols);
  rowsOf(scales, out.scales, groups());
  rowsOf(zeros, out.zeros, groups());
  rowsOf(wideScales, out.wideScales, groups());
  rowsOf(mins, out.mins, groups());
  return out;
}

QuantizedMatrix QuantizedMatrix::columnSlice(int64_t first,
                                             int64_t count) const {
  QuantizedMatrix out;
  out.format = format;
  out.rows = rows;
  out.cols = count;
  // With no group one scale covers the row: the slice keeps it.
  const int64_t g = format.group, fromGroup = g ? first / g : 0;
  const int64_t sliceGroups = out.groups(), allGroups = groups();
  auto columnsOf = [&](const auto &v, auto &to, int64_t width, int64_t from,
                       int64_t n) {
    if (v.empty())
      return;
    for (int64_t r = 0; r < rows; ++r)
      to.insert(to.end(), v.begin() + r * width + from,
                v.begin() + r * width + from + n);
  };
  columnsOf(codes, out.codes, cols, first, count);
  columnsOf(scales, out.scales, allGroups, fromGroup, sliceGroups);
  columnsOf(zeros, out.zeros, allGroups, fromGroup, sliceGroups);
  columnsOf(wideScales, out.wideScales, allGroups, fromGroup, sliceGroups);
  columnsOf(mins, out.mins, allGroups, fromGroup, sliceGroups);
  return out;
}

QuantizedMatrix quantizeRoundToNearest(const float *w, int64_t rows,
                                       int64_t cols, QuantFormat format) {
  QuantizedMatrix q;
  q.format = format;
  q.rows = rows;
  q.cols = cols;
  const int64_t groups = format.groups(cols);
  const int64_t width = format.group ? format.group : cols;
  q.codes.resize(rows * cols);
  if (format.mins) {
    q.wideScales.resize(rows * groups);
    q.mins.resize(rows * groups);
  } else {
    q.scales.resize(rows * groups);
  }
  if (format.zeroPoints)
    q.zeros.resize(rows * groups);
  const int maxCode = (1 << format.bits()) - 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float *x = w + r * cols + g * width;      // [width]
      uint8_t *code = &q.codes[r * cols + g * width]; // [width]
      float lo = 0, hi = 0, amax = 0;                 // the range includes zero
      for (int64_t i = 0; i < width; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
        amax = std::max(amax, std::fabs(x[i]));
      }
      if (format.mins) {
        // As Q4_1: the range [lo, hi] from code 0 up in f32 steps.
        const float scale = (hi - lo) / float(maxCode);
        q.wideScales[r * groups + g] = scale;
        q.mins[r * groups + g] = -lo;
        for (int64_t i = 0; i < width; ++i)
          code[i] =
              uint8_t(scale == 0 ? 0
                                 : std::clamp(int(rne((x[i] - lo) / scale)), 0,
                                              maxCode));
        continue;
      }
      uint16_t &scaleBits = q.scales[r * groups + g];
      if (format.kind == QuantKind::FP8) {
        float scale = toHalf(amax / 448.0f, scaleBits);
        for (int64_t i = 0; i < width; ++i)
          code[i] = scale == 0 ? 0 : floatToE4m3(x[i] / scale);
        continue;
      }
      if (format.zeroPoints) {
        // Asymmetric, as GPTQ's quantizer: the range [lo, hi] in 2^b - 1
        // steps, zero at the code nearest -lo / scale.
        float scale = toHalf((hi - lo) / float(maxCode), scaleBits);
        int zero =
            scale == 0 ? 0 : std::clamp(int(rne(-lo / scale)), 0, maxCode);
        q.zeros[r * groups + g] = uint8_t(zero);
        for (int64_t i = 0; i < width; ++i)
          code[i] =
              uint8_t(scale == 0 ? zero
                                 : std::clamp(int(rne(x[i] / scale)) + zero, 0,
                                              maxCode));
        continue;
      }
      // Symmetric absmax: +-amax onto +-(2^(b-1) - 1) around the middle.
      const int middle = format.middle();
      float scale = toHalf(amax / float(middle - 1), scaleBits);
      for (int64_t i = 0; i < width; ++i)
        code[i] =
            uint8_t(scale == 0 ? middle
                               : std::clamp(int(rne(x[i] / scale)) + middle, 0,
                                            maxCode));
    }
  return q;
}

} // namespace kiln
