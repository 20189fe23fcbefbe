//===- TuningDbFuzzer.cpp - the tuning database reader on any bytes -------===//
//
// readTuningDb refuses what is not a database of this version with a
// status; what it accepts can be merged into buckets and plotted.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzInput.h"
#include "tune/Plot.h"
#include "tune/TuningDb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = kiln::inputPath("tuning.json");
  auto db = kiln::readTuningDb(kiln::writeInput(path, data, size));
  if (!db.ok())
    return 0;
  for (kiln::TuningEntry &e : db->entries) {
    e.buckets = kiln::mergeBuckets(e.times);
    (void)kiln::plotEntry(e);
  }
  return 0;
}
