//===- EmuDevice.cpp ------------------------------------------------------===//
#include "runtime/EmuDevice.h"

#include "absl/strings/str_cat.h"

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
  }
  return nullptr;
}

absl::StatusOr<std::vector<float>> EmuDevice::decode(int32_t token,
                                                     int32_t position) {
  if (position < 0 || position >= program_.poolBlocks * program_.blockSize)
    return absl::InvalidArgumentError(absl::StrCat(
        "emu device: position ", position, " is outside the KV pool (",
        program_.poolBlocks * program_.blockSize, " tokens)"));
  tokens_[0] = token;
  positions_[0] = position;
  for (const Launch &l : program_.decode) {
    std::vector<void *> args;
    for (const Argument &a : l.args)
      args.push_back(address(a));
    kernels_[l.kernel](unsigned(l.grid[0]), unsigned(l.grid[1]),
                       unsigned(l.grid[2]), unsigned(l.blockThreads),
                       args.data());
  }
  std::vector<float> logits(program_.vocab); // [V]
  std::memcpy(logits.data(), arena_.data() + program_.decodeLogits,
              logits.size() * sizeof(float));
  return logits;
}

absl::StatusOr<std::vector<float>>
EmuDevice::prefill(std::span<const int32_t> tokens,
                   std::span<const int32_t> positions) {
  std::vector<float> out; // [S, V]
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto row = decode(tokens[i], positions[i]);
    if (!row.ok())
      return row.status();
    out.insert(out.end(), row->begin(), row->end());
  }
  return out;
}

} // namespace kiln
