//===- PlanDevice.h - a device that runs a Program's plans ------*- C++ -*-===//
//
// What the emu and cuda devices share: a decode step and a prefill (the
// bucket that holds the prompt, padded; chunks of the largest bucket for a
// longer one) as the Program plans them, the step's inputs staged on the
// host (tokens, positions, count, sampling), and the weight buffers packed
// as the manifest says. A backend moves the inputs in, runs launches
// (kernels and GEMMs) and reads results out.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PLANDEVICE_H
#define KILN_RUNTIME_PLANDEVICE_H

#include "runtime/Device.h"
#include "runtime/Program.h"
#include "runtime/Weights.h"

#include <array>
#include <map>

namespace kiln {

/// Where a device's weight buffers come from: a checkpoint, packed as the
/// manifest says (sources stacked, the norm weight folded into the columns
/// in f32, stored as f16), or seeded random values for a model's shapes
/// alone (--random-weights, for benchmarks): uniform in +-1/sqrt(cols), so
/// that activations stay in range through the layers.
class WeightProvider {
public:
  /// The checkpoint's tensors; rank `rank` of `ranks` (tensor
  /// parallelism) gets its slice of each sharded source.
  static WeightProvider checkpoint(const WeightSet &weights, int rank = 0,
                                   int ranks = 1) {
    WeightProvider p(&weights, 0);
    p.rank_ = rank;
    p.ranks_ = ranks;
    return p;
  }
  static WeightProvider random(uint32_t seed) {
    return WeightProvider(nullptr, seed);
  }
  bool isRandom() const { return weights_ == nullptr; }
  /// The checkpoint it packs from (null: random weights).
  const WeightSet *checkpointSet() const { return weights_; }
  /// One buffer's bytes: [rows, cols] f16, or quantized in the kernels'
  /// layout (weightBufferBytes of them).
  absl::StatusOr<std::vector<uint8_t>> pack(const WeightBuffer &w) const;
  /// `count` random f16 values of a buffer with `cols` columns, from
  /// element `first` of the stream `stream`.
  std::vector<uint16_t> randomValues(uint32_t stream, int64_t first,
                                     int64_t count, int64_t cols) const;

private:
  WeightProvider(const WeightSet *weights, uint32_t seed)
      : weights_(weights), seed_(seed) {}
  const WeightSet *weights_;
  uint32_t seed_;
  int rank_ = 0, ranks_ = 1;
};

/// Rows of a weight buffer: its sources' rows (a [cols] source is one).
int64_t weightRows(const WeightBuffer &w);

/// Bytes of a weight buffer on the device.
int64_t weightBufferBytes(const WeightBuffer &w);

/// One row of a batched decode step: a sequence's next token.
struct BatchRow {
  int32_t seq = 0;      // its slot: table row and history row
  int32_t token = 0;    // the token fed
  int32_t position = 0; // where it goes
  SamplingParams sampling;
};

/// Timed launches of one kernel (cuBLAS GEMMs: "cublas"), added up.
struct LaunchStats {
  double micros = 0;       // on the device
  int64_t calls = 0;       // launches
  int64_t weightBytes = 0; // the weight buffers they were passed
};

/// Timed steps of one kind (prefill chunks, or decode steps).
struct StepTimes {
  int64_t steps = 0;
  std::map<std::string, LaunchStats> kernels; // by kernel name
};

/// What a step chose: a token per sequence, and the logits it chose from
/// when asked for ([rows, V]; a prefill's every row).
struct StepResult {
  std::vector<int32_t> sampled;
  std::vector<float> logits;
};

/// Device memory a refusal names: "cuBLAS workspace", 32 MiB.
struct MemoryPart {
  std::string name;
  int64_t bytes = 0;
};

/// The cuBLAS workspace the cuda device gives its handle (what cuBLAS asks
/// for on Hopper), and the random block copied into random weights ([16 Mi]
/// halves).
constexpr int64_t kCublasWorkspaceBytes = 32 << 20;
constexpr int64_t kRandomBlockHalves = 16 << 20;

/// What the cuda device allocates besides the Program's regions and
/// weights: cuBLAS's workspace and an allowance for its handles (when a
/// plan has a GEMM), the random block (random weights), the L2 flush buffer
/// of twice `l2Bytes` (0: none), and a margin for what the driver keeps
/// (contexts, modules, local memory, graphs). The emu device plays a GPU
/// with the same list (KILN_EMU_MEMORY).
std::vector<MemoryPart> gpuMemoryBeside(const Program &program,
                                        bool randomWeights, int64_t l2Bytes);

class PlanDevice : public Device {
public:
  // One sequence (Device): slot 0, its table the pool's first blocks.
  absl::StatusOr<std::vector<float>>
  prefill(std::span<const int32_t> tokens,
          std::span<const int32_t> positions) override;
  absl::StatusOr<std::vector<float>> decode(int32_t token,
                                            int32_t position) override;
  void setSampling(const SamplingParams &params) override {
    sampling_[0] = params;
  }
  absl::Status setLogitBias(const LogitBias &bias) override {
    return setLogitBias(0, bias);
  }
  std::optional<int32_t> sampledToken() const override { return sampled_[0]; }

  // Several sequences (the Scheduler): slots 0 .. sequences() - 1, each
  // with a block table the caller hands out.
  int64_t sequences() const { return program_.sequences; }
  const Program &program() const { return program_; }
  /// Makes `blocks` (pool block ids, in token order) the table of slot `seq`
  /// (sent to the device with the next step).
  absl::Status setTable(int32_t seq, std::span<const int32_t> blocks);
  /// Makes `bias` the logit bias of slot `seq` (its sampling's `biased`
  /// says whether the kernel adds it), sent to the device now.
  absl::Status setLogitBias(int32_t seq, const LogitBias &bias);
  /// Runs tokens [S] of slot `seq` at positions start .. start + S - 1 (from
  /// 0: a new sequence, its history cleared) and samples its next token.
  absl::StatusOr<StepResult>
  prefillSequence(int32_t seq, std::span<const int32_t> tokens, int32_t start,
                  const SamplingParams &sampling, bool logits);
  /// One token each of rows.size() sequences in one step (the decode plan
  /// for one, else the smallest batch plan that holds them).
  absl::StatusOr<StepResult> decodeBatch(std::span<const BatchRow> rows,
                                         bool logits);

  // Measuring (kiln-run --time-candidates, runtime/TimeCandidates.h; the
  // --profile of a run).
  /// While set, every launch of every step runs on its own (no graphs) and
  /// its time on the device (CUDA events; the emu device's clock) is added
  /// to its kernel's stats in `prefill` (prefill chunks) or `decode`
  /// (decode steps); the two may be one. Null: not timed.
  void timeLaunches(StepTimes *prefill, StepTimes *decode) {
    timePrefill_ = prefill;
    timeDecode_ = decode;
    timing_ = nullptr; // each step picks its own
  }
  /// Empties the device's caches (L2), so that the next step reads its
  /// inputs from memory as a real step after other work would.
  virtual absl::Status flushCaches() { return absl::OkStatus(); }
  /// The device's memory, as a health probe reads it (-1: not known).
  struct Memory {
    int64_t freeBytes = -1, totalBytes = -1;
  };
  /// Whether the device still answers (a server's heartbeat): the cuda
  /// device finishes its work and reads its free memory; emu always does.
  virtual absl::StatusOr<Memory> probe() { return Memory(); }
  /// Makes the calling thread one that may drive the device (a server
  /// steps it on a thread of its own): the cuda device's context becomes
  /// current there.
  virtual absl::Status bindThread() { return absl::OkStatus(); }
  /// Row `row` of the last step's logits ([V] f32), read from the device.
  absl::StatusOr<std::vector<float>> lastLogits(int64_t row);

  /// "decode", "prefill bucket of 64 rows", "batch of 8 sequences": which
  /// of the Program's plans `launches` is.
  std::string planName(const std::vector<Launch> &launches) const;
  /// A launch as an error names it: "kernel kiln_decode_attn (layers.0.attn,
  /// grid 32x4x1, block 128, plan decode)", or cuBLAS's GEMM and its shape.
  std::string describeLaunch(const Launch &l,
                             const std::vector<Launch> &plan) const;

protected:
  explicit PlanDevice(Program program);

  /// Whether launch `l` runs in the step being run: every launch but the LM
  /// head the step does not want (LaunchWhen: every row's logits when they
  /// are read back, else the last row's).
  bool runs(const Launch &l) const {
    return l.when == LaunchWhen::Always ||
           (l.when == LaunchWhen::EveryLogit) == everyLogit_;
  }

  /// While the step being run is timed (timing_ is set): adds `micros` and
  /// the weights it read to the stats of `l`'s kernel ("cublas" for GEMMs).
  void recordLaunch(const Launch &l, double micros);

  /// Fails, naming each part's size, when the weights, every region the
  /// plans name and `beside` (what the device allocates besides the plan:
  /// gpuMemoryBeside) need more than `available` bytes; `what` says whose
  /// bytes ("the GPU has 80.0 GiB free of 141.0 GiB").
  absl::Status checkMemory(int64_t available, const std::string &what,
                           const std::vector<MemoryPart> &beside) const;

  /// Sends the staged step inputs (tokens_, positions_, rowSeqs_ for `rows`
  /// rows, count_, sampling_) to the device.
  virtual absl::Status sendInputs(int64_t rows) = 0;
  /// Sends the block tables (tables_).
  virtual absl::Status sendTables() = 0;
  /// Sends slot `seq`'s row of logitBias_.
  virtual absl::Status sendLogitBias(int32_t seq) = 0;
  /// Runs the launches in order.
  virtual absl::Status run(const std::vector<Launch> &launches) = 0;
  /// Zeroes the sampling history of slot `seq`: a new sequence.
  virtual absl::Status clearHistory(int32_t seq) = 0;
  /// Reads `floats` f32 logits at arena offset `offset`.
  virtual absl::Status readLogits(int64_t offset, float *out,
                                  size_t floats) = 0;
  /// Reads the first `rows` sampled tokens into sampled_.
  virtual absl::Status readSampled(int64_t rows) = 0;

  Program program_;
  // The step's inputs, a row per token of the largest plan ([rows]).
  std::vector<int32_t> tokens_, positions_, rowSeqs_;
  // Region::Count: the step's real rows, and a prefill's sequence length
  // after it (start + tokens; 0 in decode, whose rows are theirs: position
  // + 1), which dynamic RoPE scaling reads.
  std::array<int32_t, 2> count_ = {0, 0};
  std::vector<SamplingParams> sampling_; // [sequences]
  std::vector<int32_t> tables_;          // [sequences, tableBlocks]
  std::vector<float> logitBias_;         // [sequences, vocab]
  std::vector<int32_t> sampled_;         // [rows]
  StepTimes *timing_ = nullptr;          // the running step's, when timed
  bool everyLogit_ = true; // the running step reads every row's logits back

  // Stages its inputs into its ranks' devices and runs their hooks.
  friend class TensorParallelDevice;
  friend class RemoteRank;

private:
  absl::Status checkPositions(int32_t seq,
                              std::span<const int32_t> positions) const;
  /// Runs `launches` over the staged rows (count_[0] of them) and reads
  /// `sampledRows` tokens, and with `logits` the count_[0] rows of logits at
  /// `logitsAt`, appending them to `out`.
  absl::Status runStep(const std::vector<Launch> &launches, int64_t rows,
                       int64_t logitsAt, int64_t sampledRows, bool logits,
                       StepResult &out);
  std::vector<int64_t> blocksOf_;           // [sequences]: table entries in use
  int64_t lastLogitsAt_ = 0, lastRows_ = 0; // the last step's logits
  bool lastEveryLogit_ = true; // its rows all have them (else the last)
  bool tablesChanged_ = false; // tables_ differ from the device's
  StepTimes *timePrefill_ = nullptr, *timeDecode_ = nullptr; // timeLaunches
  std::map<std::string, int64_t> weightBytes_; // each weight buffer's size
};

} // namespace kiln

#endif // KILN_RUNTIME_PLANDEVICE_H
