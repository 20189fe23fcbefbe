//===- EmuDevice.cpp ------------------------------------------------------===//
#include "runtime/EmuDevice.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstring>

namespace kiln {
namespace {
/// A weight buffer as the manifest says: sources stacked, the norm weight
/// folded into the columns (in f32), stored as f16.
absl::StatusOr<std::vector<uint16_t>> pack(const WeightBuffer &w,
                                           const WeightSet &weights) {
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
} // namespace

absl::StatusOr<std::unique_ptr<EmuDevice>>
EmuDevice::create(Program program, const WeightSet &weights) {
  std::unique_ptr<EmuDevice> dev(new EmuDevice());
  auto kernels = compileEmuKernels(program.kernels);
  if (!kernels.ok())
    return kernels.status();
  dev->kernels_ = std::move(*kernels);
  for (const WeightBuffer &w : program.weights) {
    auto packed = pack(w, weights);
    if (!packed.ok())
      return packed.status();
    dev->weights_[w.name] = std::move(*packed);
  }
  dev->arena_.assign(program.arenaBytes, 0);
  dev->pool_.assign(program.poolBytes, 0);
  // One sequence: its block table is the pool in order.
  for (int64_t b = 0; b < program.poolBlocks; ++b)
    dev->blockTable_.push_back(int32_t(b));
  dev->workspace_.assign(program.workspaceFloats, 0.0f);
  // Tokens and positions: one per row of the largest prefill bucket.
  int64_t rows = program.prefill.empty() ? 1 : program.prefill.back().tokens;
  dev->tokens_.assign(std::max<int64_t>(rows, 1), 0);
  dev->positions_.assign(std::max<int64_t>(rows, 1), 0);
  dev->counters_.assign(program.counters, 0);
  dev->program_ = std::move(program);
  return dev;
}

void *EmuDevice::address(const Argument &a) {
  switch (a.region) {
  case Region::Arena:
    return arena_.data() + a.offset;
  case Region::Weight:
    return weights_.at(a.weight).data();
  case Region::Pool:
    return pool_.data() + a.offset;
  case Region::Tokens:
    return tokens_.data();
  case Region::Positions:
    return positions_.data();
  case Region::BlockTable:
    return blockTable_.data();
  case Region::Workspace:
    return workspace_.data();
  case Region::Counters:
    return counters_.data();
  case Region::Sampled:
    return sampled_.data();
  case Region::Count:
    return count_.data();
  case Region::Sampling:
    return &sampling_;
  }
  return nullptr;
}

void EmuDevice::run(const std::vector<Launch> &launches) {
  for (const Launch &l : launches) {
    std::vector<void *> args;
    for (const Argument &a : l.args)
      args.push_back(address(a));
    if (l.kernel == kGemm) {
      gemm(l.gemm, static_cast<const uint16_t *>(args[0]),
           static_cast<const uint16_t *>(args[1]),
           static_cast<float *>(args[2]));
      continue;
    }
    kernels_[l.kernel](unsigned(l.grid[0]), unsigned(l.grid[1]),
                       unsigned(l.grid[2]), unsigned(l.blockThreads),
                       args.data());
  }
}

absl::StatusOr<std::vector<float>> EmuDevice::decode(int32_t token,
                                                     int32_t position) {
  if (position < 0 || position >= program_.poolBlocks * program_.blockSize)
    return absl::InvalidArgumentError(absl::StrCat(
        "emu device: position ", position, " is outside the KV pool (",
        program_.poolBlocks * program_.blockSize, " tokens)"));
  tokens_[0] = token;
  positions_[0] = position;
  count_[0] = 1;
  run(program_.decode);
  std::vector<float> logits(program_.vocab); // [V]
  std::memcpy(logits.data(), arena_.data() + program_.decodeLogits,
              logits.size() * sizeof(float));
  return logits;
}

absl::StatusOr<std::vector<float>>
EmuDevice::prefill(std::span<const int32_t> tokens,
                   std::span<const int32_t> positions) {
  for (int32_t p : positions)
    if (p < 0 || p >= program_.poolBlocks * program_.blockSize)
      return absl::InvalidArgumentError(
          absl::StrCat("emu device: position ", p, " is outside the KV pool (",
                       program_.poolBlocks * program_.blockSize, " tokens)"));
  std::vector<float> logits; // [S, V]
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
    count_[0] = int32_t(n);
    run(plan.launches);
    const float *rows =
        reinterpret_cast<const float *>(arena_.data() + program_.prefillLogits);
    logits.insert(logits.end(), rows, rows + n * program_.vocab);
  }
  return logits;
}

void EmuDevice::gemm(const GemmShape &s, const uint16_t *a, const uint16_t *w,
                     float *c) {
  // cuBLAS's contract: f16 inputs, fp32 products and sums, f32 out.
  std::vector<float> row(s.k), wf(s.n * s.k); // [K], [N, K]
  for (int64_t i = 0; i < s.n * s.k; ++i)
    wf[i] = halfToFloat(w[i]);
  for (int64_t m = 0; m < s.m; ++m) {
    for (int64_t k = 0; k < s.k; ++k)
      row[k] = halfToFloat(a[m * s.k + k]);
    for (int64_t n = 0; n < s.n; ++n) {
      const float *wr = &wf[n * s.k];
      float acc = 0.0f;
      for (int64_t k = 0; k < s.k; ++k)
        acc += row[k] * wr[k];
      c[m * s.n + n] = acc;
    }
  }
}

} // namespace kiln
