//===- TimeCandidates.h - timing kiln tune's candidates on a device -*- C++
//-*-===//
//
// kiln tune needs MLIR and a GPU machine has none, so measuring is split:
// `kiln tune --emit-candidates DIR` writes a bundle per candidate (a setting
// of one family's knobs) and one with the default knobs, and a manifest
// (DIR/candidates.json, docs/tuning-db.md); `kiln-run --time-candidates DIR`
// runs each bundle's cases here, with the runtime alone, and writes the
// measurements; `kiln tune --measurements FILE` turns them into tuning
// database entries.
//
// A case is a prefill of `length` tokens (prompt families) or a decode step
// of `batch` sequences that each hold `length` keys (context families). Each
// runs once to warm up, then `repeats` times, the caches flushed before
// each, every launch timed on its own (CUDA events on cuda, the clock on
// emu); a candidate's time is the median over repeats of its family's
// kernels' sum. Its logits (the last row of a prefill, every row of a
// decode) are compared with the default bundle's on the same random
// weights and tokens: past the tolerance, the candidate is rejected. A
// candidate that does not run (a damaged bundle, a refused launch, a fault,
// a process that dies) is rejected with the reason, and the others are
// still measured: with `isolate`, each bundle runs in a process of its own.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TIMECANDIDATES_H
#define KILN_RUNTIME_TIMECANDIDATES_H

#include "runtime/Bundle.h"
#include "runtime/PlanDevice.h"

#include "absl/status/statusor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// The manifest's format name and the version this kiln reads and writes.
constexpr const char *kCandidatesFormat = "kiln-candidates";
constexpr const char *kMeasurementsFormat = "kiln-measurements";
constexpr int kCandidatesVersion = 1;

/// A logit may differ from the default's by this much times max(1, the
/// largest default logit): the fp16 bound of the numerics contract.
constexpr double kCandidateTolerance = 5e-2;

struct CandidateCase {
  int64_t length = 0; // prompt tokens, or keys per sequence
  int64_t batch = 1;  // sequences (context families)
};

struct CandidateFamily {
  std::string family;               // "decode.attention"
  std::string signature;            // tune's familySignature of the model
  bool prompt = false;              // prefill cases (else decode steps)
  std::vector<std::string> kernels; // whose times are the family's
  std::vector<CandidateCase> cases;
  struct Candidate {
    std::string knobs, bundle; // bundle: a path relative to the manifest
  };
  std::vector<Candidate> candidates;
};

/// DIR/candidates.json.
struct CandidateSet {
  std::string model, target, nvrtc;
  std::string reference; // the default knobs' bundle
  std::vector<CandidateFamily> families;
};

absl::Status writeCandidateSet(const std::string &path,
                               const CandidateSet &set);
absl::StatusOr<CandidateSet> readCandidateSet(const std::string &path);

/// One candidate (or the default: knobs "") at one case.
struct Measurement {
  std::string family, knobs;
  CandidateCase at;
  double micros = 0;     // the family's kernels, median
  double stepMicros = 0; // every launch of the step, median
  double maxError = 0;   // against the default's logits
  bool rejected = false;
  std::string error; // why its bundle did not run (then rejected), if so
};

/// What kiln-run --time-candidates writes.
struct MeasurementSet {
  std::string model, target, nvrtc; // from the manifest
  std::string device, driver;       // "NVIDIA H200", "12.4" ("emu", "none")
  std::string source;               // "cuda-events" or "emu-clock"
  int64_t repeats = 0;
  std::vector<CandidateFamily> families; // signatures and kernels, no bundles
  std::vector<Measurement> defaults, candidates;
};

absl::Status writeMeasurementSet(const std::string &path,
                                 const MeasurementSet &set);
absl::StatusOr<MeasurementSet> readMeasurementSet(const std::string &path);

/// Opens a device for a bundle (random weights).
using DeviceFactory =
    std::function<absl::StatusOr<std::unique_ptr<PlanDevice>>(Bundle &)>;

struct TimingOptions {
  int64_t repeats = 10;
  std::string device = "cuda", driver = "none", source = "cuda-events";
  /// Called before each bundle: (done, total, what).
  std::function<void(int64_t, int64_t, const std::string &)> progress;
  /// Called after each bundle with what is measured so far, so that a run
  /// stopped from outside (a time box) keeps it.
  std::function<void(const MeasurementSet &)> partial;
  /// Each bundle (the default's too) runs in a child process
  /// (runtime/Isolated.h): a fault, sticky on a GPU, then costs only the
  /// candidate that made it. `open` must not have been called in this
  /// process before.
  bool isolate = false;
};

/// Runs every case of the manifest at `path` on devices from `open`.
absl::StatusOr<MeasurementSet> timeCandidates(const std::string &path,
                                              const DeviceFactory &open,
                                              const TimingOptions &options);

} // namespace kiln

#endif // KILN_RUNTIME_TIMECANDIDATES_H
