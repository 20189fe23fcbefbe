//===- MeasurementsFuzzer.cpp - the measured-tuning files on any bytes ----===//
//
// What a GPU machine sends back (kiln-run --time-candidates' measurements)
// and what it is sent (kiln tune --emit-candidates' manifest): each reader
// refuses what is not its file with a status; measurements it accepts
// become tuning database entries (kiln tune --measurements) that merge
// into buckets and plot.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzInput.h"
#include "runtime/TimeCandidates.h"
#include "tune/Measurements.h"
#include "tune/Plot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = kiln::inputPath("measurements.json");
  kiln::writeInput(path, data, size);
  (void)kiln::readCandidateSet(path);
  auto set = kiln::readMeasurementSet(path);
  if (!set.ok())
    return 0;
  kiln::TuningDb db;
  if (!kiln::importMeasurements(*set, db).ok())
    return 0;
  for (const kiln::TuningEntry &e : db.entries)
    (void)kiln::plotEntry(e);
  return 0;
}
