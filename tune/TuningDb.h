//===- TuningDb.h - what kiln tune found, kept for compiles -----*- C++ -*-===//
//
// One versioned JSON file (docs/tuning-db.md). An entry is one kernel family
// of one model on one GPU and toolchain, at one batch size: the time of
// every candidate at every sequence length tuned (so that an interrupted
// tune resumes and the plots can be drawn again), and the buckets the
// winners make. kiln compile --tuning-db takes the buckets of the entries
// whose key matches what it compiles for and reports the others.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TUNE_TUNINGDB_H
#define KILN_TUNE_TUNINGDB_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// The database format version this kiln writes and reads.
constexpr int kTuningDbVersion = 1;

/// Where an entry's numbers are valid.
struct TuningKey {
  std::string gpu;       // "NVIDIA H200", or the cost model's GPU
  std::string arch;      // "sm_90"
  std::string driver;    // the CUDA driver's version; "none" for the model
  std::string nvrtc;     // "13.0"
  std::string family;    // "decode.attention", ...
  std::string signature; // a hash of the family's kernels' shapes
  int64_t batch = 1;

  bool operator==(const TuningKey &) const = default;
  std::string str() const;
};

/// Sequence lengths [from, to] that share a winner.
struct TuningBucket {
  int64_t from = 0, to = 0;
  std::string knobs; // "kv-splits=4,attention-warps=4"
  double micros = 0; // the winner's time at `to`
};

struct TuningEntry {
  TuningKey key;
  std::string source; // "cost-model" or "cuda-events"
  /// Seconds per candidate (by knobs) at each sequence length.
  std::map<int64_t, std::map<std::string, double>> times;
  std::vector<TuningBucket> buckets;
};

struct TuningDb {
  std::vector<TuningEntry> entries;

  /// The entry of `key`, made when missing.
  TuningEntry &entry(const TuningKey &key, const std::string &source);
  const TuningEntry *find(const TuningKey &key) const;
};

/// An absent file is an empty database; a damaged one, or another version,
/// an error naming the file and the fault.
absl::StatusOr<TuningDb> readTuningDb(const std::string &path);
/// Whole or nothing (written beside and renamed): an interrupted tune
/// leaves the last complete database.
absl::Status writeTuningDb(const std::string &path, const TuningDb &db);

/// Merges neighbouring lengths into buckets: each bucket starts with the
/// candidate, of those within `slack` (0.03: 3%) of the best at its first
/// length, that stays within it for the most lengths, and ends where it
/// stops being so. Ties: the faster at the first length, then the knobs
/// that sort first.
std::vector<TuningBucket>
mergeBuckets(const std::map<int64_t, std::map<std::string, double>> &times,
             double slack = 0.03);

} // namespace kiln

#endif // KILN_TUNE_TUNINGDB_H
