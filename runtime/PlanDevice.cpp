//===- PlanDevice.cpp -----------------------------------------------------===//
#include "runtime/PlanDevice.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>

namespace kiln {

int64_t weightRows(const WeightBuffer &w) {
  int64_t rows = 0;
  for (const WeightSource &s : w.sources)
    rows += s.shape.size() == 2 ? s.shape[0] : 1;
  return rows;
}

std::vector<uint16_t> WeightProvider::randomValues(uint32_t stream,
                                                   int64_t first, int64_t count,
                                                   int64_t cols) const {
  // A counter-based hash (splitmix64): any element, in any order.
  float scale = 1.0f / std::sqrt(float(cols));
  std::vector<uint16_t> out(count); // [count]
  for (int64_t i = 0; i < count; ++i) {
    uint64_t z = (uint64_t(seed_) << 32 | stream) * 0x9e3779b97f4a7c15ull +
                 uint64_t(first + i);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float u = float(z >> 40) * (1.0f / 16777216.0f); // [0, 1)
    out[i] = floatToHalf((2.0f * u - 1.0f) * scale);
  }
  return out;
}

absl::StatusOr<std::vector<uint16_t>>
WeightProvider::pack(const WeightBuffer &w) const {
  if (isRandom()) {
    uint32_t stream = 0; // the buffer's name picks its stream
    for (char c : w.name)
      stream = stream * 31 + uint8_t(c);
    return randomValues(stream, 0, weightRows(w) * w.cols, w.cols);
  }
  const WeightSet &weights = *weights_;
  std::vector<float> scale(w.cols, 1.0f); // [cols]
  if (!w.scaledBy.empty()) {
    const TensorView *g = weights.find(w.scaledBy);
    if (!g || g->numElements() != w.cols)
      return absl::InvalidArgumentError(
          absl::StrCat(weights.origin(), ": no weight '", w.scaledBy, "' of ",
                       w.cols, " elements"));
    g->toFloat(scale.data());
  }
  std::vector<uint16_t> out; // [sum(rows), cols]
  for (const WeightSource &source : w.sources) {
    const TensorView *t = weights.find(source.name);
    if (!t || t->shape != source.shape)
      return absl::InvalidArgumentError(
          absl::StrCat(weights.origin(), ": no weight '", source.name,
                       "' of shape ", shapeString(source.shape)));
    std::vector<float> rows(t->numElements());
    t->toFloat(rows.data());
    for (size_t j = 0; j < rows.size(); ++j)
      out.push_back(floatToHalf(rows[j] * scale[j % w.cols]));
  }
  return out;
}

PlanDevice::PlanDevice(Program program) : program_(std::move(program)) {
  int64_t rows = std::max<int64_t>(program_.prefill.back().tokens, 1);
  tokens_.assign(rows, 0);
  positions_.assign(rows, 0);
}

absl::Status
PlanDevice::checkPositions(std::span<const int32_t> positions) const {
  int64_t slots = program_.poolBlocks * program_.blockSize;
  for (int32_t p : positions)
    if (p < 0 || p >= slots)
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " device: position ", p,
                       " is outside the KV pool (", slots, " tokens)"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> PlanDevice::decode(int32_t token,
                                                      int32_t position) {
  if (absl::Status s = checkPositions({&position, 1}); !s.ok())
    return s;
  tokens_[0] = token;
  positions_[0] = position;
  count_ = 1;
  if (absl::Status s = sendInputs(1); !s.ok())
    return s;
  if (absl::Status s = run(program_.decode); !s.ok())
    return s;
  std::vector<float> logits(program_.vocab); // [V]
  if (absl::Status s =
          readLogits(program_.decodeLogits, logits.data(), logits.size());
      !s.ok())
    return s;
  return logits;
}

absl::StatusOr<std::vector<float>>
PlanDevice::prefill(std::span<const int32_t> tokens,
                    std::span<const int32_t> positions) {
  if (absl::Status s = checkPositions(positions); !s.ok())
    return s;
  // A prompt from position 0 starts a sequence: nothing seen yet.
  if (!positions.empty() && positions[0] == 0)
    if (absl::Status s = clearHistory(); !s.ok())
      return s;
  std::vector<float> logits(tokens.size() * program_.vocab); // [S, V]
  // A prompt longer than the largest bucket runs in chunks of it: each
  // chunk's attention reads the earlier chunks' keys from the pool.
  int64_t largest = program_.prefill.back().tokens;
  for (size_t begin = 0; begin < tokens.size(); begin += largest) {
    size_t n = std::min<size_t>(largest, tokens.size() - begin);
    const PrefillPlan &plan = program_.prefillFor(int64_t(n));
    // The bucket's padding rows hold token 0 at position 0; the kernels
    // skip them (they read count).
    std::fill(tokens_.begin(), tokens_.end(), 0);
    std::fill(positions_.begin(), positions_.end(), 0);
    std::copy_n(tokens.begin() + begin, n, tokens_.begin());
    std::copy_n(positions.begin() + begin, n, positions_.begin());
    count_ = int32_t(n);
    if (absl::Status s = sendInputs(plan.tokens); !s.ok())
      return s;
    if (absl::Status s = run(plan.launches); !s.ok())
      return s;
    if (absl::Status s =
            readLogits(program_.prefillLogits, &logits[begin * program_.vocab],
                       n * program_.vocab);
        !s.ok())
      return s;
  }
  return logits;
}

} // namespace kiln
