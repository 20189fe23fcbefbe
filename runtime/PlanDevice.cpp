//===- PlanDevice.cpp -----------------------------------------------------===//
#include "runtime/PlanDevice.h"
#include "runtime/BlasMatmul.h"
#include "runtime/QuantLayout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln {

int64_t weightRows(const WeightBuffer &w) {
  int64_t rows = 0;
  for (const WeightSource &s : w.sources)
    rows += s.shape.size() == 2 ? s.shape[0] : 1;
  return rows;
}

int64_t weightBufferBytes(const WeightBuffer &w) {
  if (w.quant)
    return quantLayout(*w.quant, weightRows(w), w.cols, !w.scaledBy.empty())
        .bytes;
  return weightRows(w) * w.cols * 2;
}

namespace {
/// A quantized buffer from its stacked rows w[rows, cols] and the norm
/// weight (f16 bits, or empty).
std::vector<uint8_t> quantizedBuffer(const WeightBuffer &b,
                                     const std::vector<float> &w,
                                     const std::vector<uint16_t> &norm) {
  QuantizedMatrix q =
      quantizeRoundToNearest(w.data(), weightRows(b), b.cols, *b.quant);
  return packForKernels(q, norm.empty() ? nullptr : norm.data());
}

/// Appends the rows of `m` (of the buffer's kind and group) to `out`,
/// whose format is the buffer's: a source without zero points gets the
/// middle code's (GPTQ's symmetric modules), which is its value.
void appendRows(QuantizedMatrix &out, const QuantizedMatrix &m) {
  out.codes.insert(out.codes.end(), m.codes.begin(), m.codes.end());
  out.scales.insert(out.scales.end(), m.scales.begin(), m.scales.end());
  out.wideScales.insert(out.wideScales.end(), m.wideScales.begin(),
                        m.wideScales.end());
  out.mins.insert(out.mins.end(), m.mins.begin(), m.mins.end());
  if (out.format.zeroPoints) {
    if (m.format.zeroPoints)
      out.zeros.insert(out.zeros.end(), m.zeros.begin(), m.zeros.end());
    else
      out.zeros.resize(out.zeros.size() + m.rows * m.groups(),
                       uint8_t(out.format.middle()));
  }
  out.rows += m.rows;
}

/// A quantized buffer from checkpoint sources, some (or all) stored
/// pre-quantized (GPTQ, AWQ): each source read in canonical form (a float
/// one quantized to nearest, as --quantize would), their rows stacked.
/// Rank `rank` of `ranks` reads its slice of each split source: the whole
/// tensor quantized (or read), then the rank's rows or whole groups of
/// columns, so that the split model's weights are the whole model's.
absl::StatusOr<QuantizedMatrix> stackQuantized(const WeightSet &weights,
                                               const WeightBuffer &b, int rank,
                                               int ranks) {
  const QuantFormat &f = *b.quant;
  QuantFormat plain = f; // what a source is read as, columns in order
  plain.actOrder = false;
  QuantizedMatrix out;
  out.format = f;
  out.cols = b.cols;
  std::string gIdxFrom; // the source whose g_idx the buffer takes
  for (const WeightSource &source : b.sources) {
    if (source.shape.size() != 2 || source.shape[1] != b.cols)
      return absl::InvalidArgumentError(absl::StrCat(
          weights.origin(), ": weight '", source.name, "' of shape ",
          shapeString(source.shape), " cannot be a quantized buffer's rows"));
    // The checkpoint's tensor, whole; the rank's slice is cut below.
    const std::vector<int64_t> whole = source.checkpointShape();
    const int64_t rows = whole[0], cols = whole[1];
    QuantizedMatrix m;
    if (weights.prequantized(source.name)) {
      std::string module = WeightSet::moduleOf(source.name);
      auto read = weights.readQuantized(source.name, rows, cols);
      if (!read.ok())
        return read.status();
      m = std::move(*read);
      if (m.format.kind != f.kind || m.format.group != f.group ||
          m.format.mins != f.mins || (m.format.zeroPoints && !f.zeroPoints))
        return absl::InvalidArgumentError(absl::StrCat(
            weights.origin(), ": module '", module, "' is stored as ",
            m.format.name(), "; buffer '", b.name, "' holds ", f.name(),
            ": compile the model from this checkpoint"));
      if (!m.gIdx.empty() && !f.actOrder)
        return absl::InvalidArgumentError(absl::StrCat(
            weights.origin(), ": tensor '", module,
            ".g_idx' orders the groups' columns (act-order), but "
            "quantization_config.desc_act is false and the model was "
            "compiled without act-order"));
    } else {
      const TensorView *t = weights.find(source.name);
      if (!t || t->shape != whole)
        return absl::InvalidArgumentError(
            absl::StrCat(weights.origin(), ": no weight '", source.name,
                         "' of shape ", shapeString(whole)));
      std::vector<float> w(t->numElements()); // [rows, cols]
      t->toFloat(w.data());
      m = quantizeRoundToNearest(w.data(), rows, cols, plain);
    }
    if (source.shardParts > 1) {
      const int64_t part = int64_t(rank) * source.shardParts / ranks;
      const int64_t n = source.shape[source.shardAxis];
      const int64_t group = m.format.group;
      if (source.shardAxis == 1 && (!m.gIdx.empty() || (group && n % group)))
        return absl::InvalidArgumentError(absl::StrCat(
            weights.origin(), ": weight '", source.name, "' split into ",
            source.shardParts, " column slices of ", n, ": ",
            m.gIdx.empty() ? absl::StrCat("not whole groups of ", group)
                           : std::string("act-order's groups (g_idx) span "
                                         "the slices")));
      m = source.shardAxis == 0 ? m.rowSlice(part * n, n)
                                : m.columnSlice(part * n, n);
    }
    // One buffer, one column order: every source's g_idx must agree (q, k
    // and v of a layer share their input, and GPTQ its order; gate and up
    // too).
    if (&source == &b.sources.front()) {
      out.gIdx = m.gIdx;
      gIdxFrom = source.name;
    } else if (m.gIdx != out.gIdx) {
      return absl::InvalidArgumentError(absl::StrCat(
          weights.origin(), ": the g_idx of '", WeightSet::moduleOf(gIdxFrom),
          "' and '", WeightSet::moduleOf(source.name),
          "' differ; kiln packs them into one buffer ('", b.name,
          "'), which needs one column order"));
    }
    appendRows(out, m);
  }
  return out;
}

std::vector<uint8_t> bytesOf(const std::vector<uint16_t> &halves) {
  std::vector<uint8_t> out(halves.size() * 2);
  std::memcpy(out.data(), halves.data(), out.size());
  return out;
}
} // namespace

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

absl::StatusOr<std::vector<uint8_t>>
WeightProvider::pack(const WeightBuffer &w) const {
  const int64_t elements = weightRows(w) * w.cols;
  if (isRandom()) {
    uint32_t stream = 0; // the buffer's name picks its stream
    for (char c : w.name)
      stream = stream * 31 + uint8_t(c);
    std::vector<uint16_t> values = randomValues(stream, 0, elements, w.cols);
    if (!w.quant)
      return bytesOf(values);
    std::vector<float> rows(elements); // [rows, cols]
    for (int64_t i = 0; i < elements; ++i)
      rows[i] = halfToFloat(values[i]);
    std::vector<uint16_t> norm;
    if (!w.scaledBy.empty())
      norm.assign(w.cols, floatToHalf(1.0f));
    return quantizedBuffer(w, rows, norm);
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
  if (w.quant) {
    // Each source quantized (or read pre-quantized), then stacked; the
    // norm stays apart: the kernels scale x by it (QuantLayout.h).
    auto q = stackQuantized(weights, w, rank_, ranks_);
    if (!q.ok())
      return q.status();
    std::vector<uint16_t> norm;
    if (!w.scaledBy.empty())
      for (float g : scale)
        norm.push_back(floatToHalf(g));
    return packForKernels(*q, norm.empty() ? nullptr : norm.data());
  }
  std::vector<float> rows; // [sum(rows), cols]: the sources stacked
  rows.reserve(elements);
  for (const WeightSource &source : w.sources) {
    const TensorView *t = weights.find(source.name);
    if (!t || t->shape != source.checkpointShape())
      return absl::InvalidArgumentError(
          absl::StrCat(weights.origin(), ": no weight '", source.name,
                       "' of shape ", shapeString(source.checkpointShape())));
    size_t at = rows.size();
    if (source.shardParts == 1) {
      rows.resize(at + t->numElements());
      t->toFloat(rows.data() + at);
      continue;
    }
    // The rank's part: a block of rows, or of each row's columns.
    std::vector<float> whole(t->numElements()); // checkpointShape()
    t->toFloat(whole.data());
    const int64_t part = int64_t(rank_) * source.shardParts / ranks_;
    const int64_t sliceRows = source.shape[0];
    const int64_t sliceCols = source.shape.size() == 2 ? source.shape[1] : 1;
    const int64_t wholeCols =
        source.checkpointShape().size() == 2 ? source.checkpointShape()[1] : 1;
    for (int64_t r = 0; r < sliceRows; ++r) {
      int64_t fromRow = source.shardAxis == 0 ? part * sliceRows + r : r;
      int64_t fromCol = source.shardAxis == 1 ? part * sliceCols : 0;
      const float *from = &whole[fromRow * wholeCols + fromCol];
      rows.insert(rows.end(), from, from + sliceCols);
    }
  }
  std::vector<uint16_t> out(elements); // [sum(rows), cols] f16
  for (int64_t j = 0; j < elements; ++j)
    out[j] = floatToHalf(rows[j] * scale[j % w.cols]);
  return bytesOf(out);
}

PlanDevice::PlanDevice(Program program) : program_(std::move(program)) {
  const Program &p = program_;
  int64_t rows = std::max<int64_t>(p.prefill.back().rows, 1);
  if (!p.batches.empty())
    rows = std::max(rows, p.batches.back().rows);
  tokens_.assign(rows, 0);
  positions_.assign(rows, 0);
  rowSeqs_.assign(rows, 0);
  sampled_.assign(rows, 0);
  int64_t seqs = std::max<int64_t>(p.sequences, 1);
  sampling_.assign(seqs, SamplingParams());
  tables_.assign(seqs * p.tableBlocks, 0);
  logitBias_.assign(seqs * p.vocab, 0.0f);
  blocksOf_.assign(seqs, 0);
  // Slot 0's table for the one-sequence calls: the pool's first blocks.
  int64_t first = std::min(p.poolBlocks, p.tableBlocks);
  for (int64_t b = 0; b < first; ++b)
    tables_[b] = int32_t(b);
  blocksOf_[0] = first;
  for (const WeightBuffer &w : p.weights)
    weightBytes_[w.name] = weightBufferBytes(w);
}

void PlanDevice::recordLaunch(const Launch &l, double micros) {
  if (!timing_)
    return;
  LaunchStats &s =
      timing_
          ->kernels[l.kernel == kGemm        ? std::string("cublas")
                    : l.kernel == kAllReduce ? std::string("all_reduce")
                    : l.kernel == kAllGather ? std::string("all_gather")
                                             : program_.kernels[l.kernel].name];
  s.micros += micros;
  ++s.calls;
  for (const Argument &a : l.args)
    if (a.region == Region::Weight)
      s.weightBytes += weightBytes_[a.weight];
  if (l.kernel == kGemm && l.args[1].region == Region::Dequantized)
    s.weightBytes += l.gemm.n * l.gemm.k * (l.gemm.fp8 ? 1 : 2); // its W
}

std::vector<MemoryPart> gpuMemoryBeside(const Program &program,
                                        bool randomWeights, int64_t l2Bytes) {
  std::vector<MemoryPart> parts;
  bool gemms = false;
  for (const auto *plans : {&program.prefill, &program.batches})
    for (const StepPlan &plan : *plans)
      for (const Launch &l : plan.launches)
        gemms = gemms || l.kernel == kGemm;
  if (gemms) {
    parts.push_back({"cuBLAS workspace", kCublasWorkspaceBytes});
    // An allowance (cuBLAS and cuBLASLt load their kernels lazily).
    parts.push_back({"cuBLAS handles", 128 << 20});
  }
  if (randomWeights)
    parts.push_back({"random-weights block", kRandomBlockHalves * 2});
  if (l2Bytes > 0)
    parts.push_back({"L2 flush buffer", 2 * l2Bytes});
  parts.push_back({"margin", 256 << 20});
  return parts;
}

absl::Status
PlanDevice::checkMemory(int64_t available, const std::string &what,
                        const std::vector<MemoryPart> &beside) const {
  const Program &p = program_;
  int64_t weights = 0;
  for (const WeightBuffer &w : p.weights)
    weights += weightBufferBytes(w);
  int64_t rows = int64_t(tokens_.size());
  // Tables, sampling state and the step's inputs and outputs.
  // (The history and the logit bias: [sequences, vocab] each.)
  int64_t small = int64_t(tables_.size()) * 4 + p.sequences * p.vocab * 8 +
                  int64_t(sampling_.size() * sizeof(SamplingParams)) +
                  rows * 16 + p.counters * 4;
  std::vector<MemoryPart> parts = {{"weights", weights},
                                   {"arena", p.arenaBytes},
                                   {"KV pool", p.poolBytes},
                                   {"workspace", p.workspaceFloats * 4},
                                   {"tables and state", small}};
  if (p.dequantizedHalves > 0)
    parts.push_back({"dequantized weight", p.dequantizedHalves * 2});
  parts.insert(parts.end(), beside.begin(), beside.end());
  int64_t total = 0;
  for (const MemoryPart &part : parts)
    total += part.bytes;
  if (total <= available)
    return absl::OkStatus();
  auto mib = [](int64_t bytes) {
    return absl::StrFormat("%.1f MiB", double(bytes) / (1 << 20));
  };
  std::string each;
  for (const MemoryPart &part : parts)
    absl::StrAppend(&each, each.empty() ? "" : ", ", part.name, " ",
                    mib(part.bytes));
  return absl::ResourceExhaustedError(absl::StrCat(
      name(), " device: needs ", mib(total), " (", each, "); ", what));
}

std::string PlanDevice::planName(const std::vector<Launch> &launches) const {
  const Program &p = program_;
  if (&launches == &p.decode)
    return "decode";
  for (const StepPlan &plan : p.prefill)
    if (&launches == &plan.launches)
      return absl::StrCat("prefill bucket of ", plan.rows, " rows");
  for (const StepPlan &plan : p.batches)
    if (&launches == &plan.launches)
      return absl::StrCat("batch of ", plan.rows, " sequences");
  return "a plan not in the program";
}

std::string PlanDevice::describeLaunch(const Launch &l,
                                       const std::vector<Launch> &plan) const {
  if (l.kernel == kGemm)
    return absl::StrCat("cuBLAS GEMM ", describeGemm(l.gemm), " (", l.name,
                        ", algo ", l.gemm.algo, ", plan ", planName(plan), ")");
  if (!runsKernel(l.kernel))
    return absl::StrCat(l.kernel == kAllReduce ? "all-reduce" : "all-gather",
                        " of ", l.collectiveCols, " columns (plan ",
                        planName(plan), ")");
  const KernelCode &k = program_.kernels.at(l.kernel);
  return absl::StrCat("kernel ", k.entry, " (", l.name, ", grid ", l.grid[0],
                      "x", l.grid[1], "x", l.grid[2], ", block ",
                      l.blockThreads, ", plan ", planName(plan), ")");
}

absl::Status PlanDevice::setTable(int32_t seq,
                                  std::span<const int32_t> blocks) {
  const Program &p = program_;
  if (seq < 0 || seq >= p.sequences || int64_t(blocks.size()) > p.tableBlocks)
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " device: no table of ", blocks.size(), " blocks for slot ",
        seq, " (", p.sequences, " slots of ", p.tableBlocks, " blocks)"));
  for (int32_t b : blocks)
    if (b < 0 || b >= p.poolBlocks)
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " device: block ", b,
                       " is outside the KV pool (", p.poolBlocks, " blocks)"));
  std::copy(blocks.begin(), blocks.end(), &tables_[seq * p.tableBlocks]);
  blocksOf_[seq] = int64_t(blocks.size());
  tablesChanged_ = true; // sent with the next step's inputs, once
  return absl::OkStatus();
}

absl::Status PlanDevice::setLogitBias(int32_t seq, const LogitBias &bias) {
  const Program &p = program_;
  if (seq < 0 || seq >= p.sequences)
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " device: no sequence slot ", seq));
  float *row = &logitBias_[int64_t(seq) * p.vocab];
  std::fill_n(row, p.vocab, 0.0f);
  for (const auto &[token, b] : bias) {
    if (token < 0 || token >= p.vocab)
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " device: a logit bias for token ", token,
                       ", outside the vocabulary of ", p.vocab));
    row[token] += b;
  }
  return sendLogitBias(seq);
}

absl::Status
PlanDevice::checkPositions(int32_t seq,
                           std::span<const int32_t> positions) const {
  int64_t slots = blocksOf_[seq] * program_.blockSize;
  for (int32_t p : positions)
    if (p < 0 || p >= slots)
      return absl::InvalidArgumentError(absl::StrCat(
          name(), " device: position ", p, " is outside the KV blocks of ",
          seq == 0 && program_.sequences == 1
              ? std::string("the sequence")
              : absl::StrCat("sequence slot ", seq),
          " (", slots, " tokens)"));
  return absl::OkStatus();
}

absl::Status PlanDevice::runStep(const std::vector<Launch> &launches,
                                 int64_t rows, int64_t logitsAt,
                                 int64_t sampledRows, bool logits,
                                 StepResult &out) {
  if (tablesChanged_) {
    if (absl::Status s = sendTables(); !s.ok())
      return s;
    tablesChanged_ = false;
  }
  if (absl::Status s = sendInputs(rows); !s.ok())
    return s;
  if (timing_)
    ++timing_->steps;
  // Every row's logits only when they are read back: sampling needs the
  // last row's alone.
  everyLogit_ = logits;
  if (absl::Status s = run(launches); !s.ok())
    return s;
  lastLogitsAt_ = logitsAt;
  lastRows_ = count_[0];
  // A plan without a last-row LM head (decode, batches) computes them all.
  lastEveryLogit_ =
      logits || std::none_of(launches.begin(), launches.end(), [](auto &l) {
        return l.when == LaunchWhen::LastLogit;
      });
  if (logits) {
    size_t at = out.logits.size();
    out.logits.resize(at + size_t(count_[0]) * program_.vocab);
    if (absl::Status s = readLogits(logitsAt, &out.logits[at],
                                    size_t(count_[0]) * program_.vocab);
        !s.ok())
      return s;
  }
  if (absl::Status s = readSampled(sampledRows); !s.ok())
    return s;
  out.sampled.assign(sampled_.begin(), sampled_.begin() + sampledRows);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> PlanDevice::lastLogits(int64_t row) {
  if (row < 0 || row >= lastRows_)
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " device: the last step has no row ", row));
  if (!lastEveryLogit_ && row != lastRows_ - 1)
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " device: the last step computed the logits of its last row (",
        lastRows_ - 1, ") only, not of row ", row));
  std::vector<float> out(program_.vocab);
  if (absl::Status s = readLogits(lastLogitsAt_ + row * program_.vocab * 4,
                                  out.data(), out.size());
      !s.ok())
    return s;
  return out;
}

absl::StatusOr<std::vector<float>> PlanDevice::decode(int32_t token,
                                                      int32_t position) {
  BatchRow row{0, token, position, sampling_[0]};
  auto result = decodeBatch({&row, 1}, true);
  if (!result.ok())
    return result.status();
  return std::move(result->logits);
}

absl::StatusOr<StepResult>
PlanDevice::decodeBatch(std::span<const BatchRow> rows, bool logits) {
  const Program &p = program_;
  int64_t n = int64_t(rows.size());
  int64_t most = p.batches.empty() ? 1 : p.batches.back().rows;
  if (n < 1 || n > most)
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " device: a batch of ", n,
                     " sequences; the plans hold 1 to ", most));
  for (const BatchRow &r : rows) {
    if (r.seq < 0 || r.seq >= p.sequences)
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " device: no sequence slot ", r.seq));
    if (absl::Status s = checkPositions(r.seq, {&r.position, 1}); !s.ok())
      return s;
  }
  const std::vector<Launch> &launches =
      n == 1 ? p.decode : Program::planFor(p.batches, n).launches;
  int64_t planRows = n == 1 ? 1 : Program::planFor(p.batches, n).rows;
  // Padding rows: token 0 at position 0 of slot 0; the kernels skip them.
  std::fill(tokens_.begin(), tokens_.end(), 0);
  std::fill(positions_.begin(), positions_.end(), 0);
  std::fill(rowSeqs_.begin(), rowSeqs_.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    tokens_[i] = rows[i].token;
    positions_[i] = rows[i].position;
    rowSeqs_[i] = rows[i].seq;
    sampling_[rows[i].seq] = rows[i].sampling;
  }
  count_ = {int32_t(n), 0};
  timing_ = timeDecode_;
  StepResult out;
  if (absl::Status s =
          runStep(launches, planRows, n == 1 ? p.decodeLogits : p.prefillLogits,
                  n, logits, out);
      !s.ok())
    return s;
  return out;
}

absl::StatusOr<StepResult>
PlanDevice::prefillSequence(int32_t seq, std::span<const int32_t> tokens,
                            int32_t start, const SamplingParams &sampling,
                            bool logits) {
  const Program &p = program_;
  if (seq < 0 || seq >= p.sequences)
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " device: no sequence slot ", seq));
  if (!tokens.empty())
    if (absl::Status s = checkPositions(
            seq,
            std::vector<int32_t>{start, int32_t(start + tokens.size() - 1)});
        !s.ok())
      return s;
  // A prompt from position 0 starts a sequence: nothing seen yet.
  if (start == 0)
    if (absl::Status s = clearHistory(seq); !s.ok())
      return s;
  sampling_[seq] = sampling;
  timing_ = timePrefill_;
  StepResult out;
  // A prompt longer than the largest bucket runs in chunks of it: each
  // chunk's attention reads the earlier chunks' keys from the pool.
  int64_t largest = p.prefill.back().rows;
  for (size_t begin = 0; begin < tokens.size(); begin += largest) {
    size_t n = std::min<size_t>(largest, tokens.size() - begin);
    const StepPlan &plan = p.prefillFor(int64_t(n));
    // The bucket's padding rows hold token 0 at position 0; the kernels
    // skip them (they read count).
    std::fill(tokens_.begin(), tokens_.end(), 0);
    std::fill(positions_.begin(), positions_.end(), 0);
    std::fill(rowSeqs_.begin(), rowSeqs_.end(), seq);
    std::copy_n(tokens.begin() + begin, n, tokens_.begin());
    for (size_t i = 0; i < n; ++i)
      positions_[i] = int32_t(start + begin + i);
    count_ = {int32_t(n), int32_t(start + tokens.size())};
    if (absl::Status s =
            runStep(plan.launches, plan.rows, p.prefillLogits, 1, logits, out);
        !s.ok())
      return s;
  }
  return out;
}

absl::StatusOr<std::vector<float>>
PlanDevice::prefill(std::span<const int32_t> tokens,
                    std::span<const int32_t> positions) {
  // Positions are consecutive from the first (Device's callers' only use).
  for (size_t i = 1; i < positions.size(); ++i)
    if (positions[i] != positions[0] + int32_t(i))
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " device: prefill positions must be "
                               "consecutive"));
  if (tokens.size() != positions.size())
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " device: ", tokens.size(), " tokens at ",
                     positions.size(), " positions"));
  auto out = prefillSequence(0, tokens, positions.empty() ? 0 : positions[0],
                             sampling_[0], true);
  if (!out.ok())
    return out.status();
  return std::move(out->logits);
}

} // namespace kiln
