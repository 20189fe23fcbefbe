//===- Measurements.h - kiln tune --measurements -----------------*- C++
//-*-===//
//
// A GPU's measurements of the candidates (kiln-run --time-candidates,
// runtime/TimeCandidates.h) into the tuning database: an entry per family
// and batch keyed by the GPU, its driver and the NVRTC that compiled the
// candidates, with the rejected candidates left out; and the report: per
// bucket the winner's speedup over the default knobs, the candidates
// rejected, and how the cost model's picks (when the database holds the
// model's entry for the same kernels) fare against the measured best.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TUNE_MEASUREMENTS_H
#define KILN_TUNE_MEASUREMENTS_H

#include "runtime/TimeCandidates.h"
#include "tune/TuningDb.h"

#include <string>
#include <vector>

namespace kiln {

/// Adds (or replaces) the entries of `set` in `db`; returns the report's
/// lines. Fails on a measurement of a family this kiln does not have.
absl::StatusOr<std::vector<std::string>>
importMeasurements(const MeasurementSet &set, TuningDb &db);

} // namespace kiln

#endif // KILN_TUNE_MEASUREMENTS_H
