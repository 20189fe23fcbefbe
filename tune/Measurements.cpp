//===- Measurements.cpp ---------------------------------------------------===//
#include "tune/Measurements.h"
#include "tune/Tuner.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <map>

namespace kiln {
namespace {

using Times = std::map<int64_t, std::map<std::string, double>>;

/// The fastest knobs at `length` in `times` of those `among` has (all when
/// null); ties: the knobs that sort first (the map's order).
const std::pair<const std::string, double> *
best(const Times &times, int64_t length,
     const std::map<std::string, double> *among = nullptr) {
  auto at = times.find(length);
  if (at == times.end())
    return nullptr;
  const std::pair<const std::string, double> *b = nullptr;
  for (const auto &kv : at->second)
    if ((!among || among->count(kv.first)) && (!b || kv.second < b->second))
      b = &kv;
  return b;
}

/// "how the cost model's picks fare": at each measured length the model
/// ranked, the measured time of its pick (of the candidates measured there)
/// against the measured best.
std::string modelLine(const TuningEntry &model, const Times &measured) {
  int64_t lengths = 0, close = 0;
  double worst = 1;
  int64_t worstAt = 0;
  for (const auto &[length, candidates] : measured) {
    const auto *pick = best(model.times, length, &candidates);
    const auto *top = best(measured, length);
    if (!pick || !top)
      continue;
    double ratio = candidates.at(pick->first) / std::max(top->second, 1e-9);
    ++lengths;
    close += ratio <= 1.03;
    if (ratio > worst) {
      worst = ratio;
      worstAt = length;
    }
  }
  if (lengths == 0)
    return "the cost model ranked none of the measured lengths";
  return absl::StrFormat(
      "the cost model's pick is within 3%% of the measured best at %d of %d "
      "lengths%s",
      close, lengths,
      worst > 1.03
          ? absl::StrFormat("; worst %.2fx slower, at %d", worst, worstAt)
          : std::string());
}
} // namespace

absl::StatusOr<std::vector<std::string>>
importMeasurements(const MeasurementSet &set, TuningDb &db) {
  std::vector<std::string> lines;
  for (const CandidateFamily &f : set.families) {
    bool known = false;
    for (const TuneFamily &k : tuneFamilies())
      known = known || k.name == f.family;
    if (!known)
      return absl::InvalidArgumentError(
          absl::StrCat("a measurement of family '", f.family,
                       "', which this kiln does not have"));
    std::map<int64_t, Times> byBatch;                      // candidates
    std::map<int64_t, std::map<int64_t, double>> defaults; // [batch][length]
    for (const Measurement &m : set.candidates)
      if (m.family == f.family) {
        if (m.rejected && !m.error.empty())
          lines.push_back(absl::StrFormat(
              "%-19s batch %-3d rejected %s at %d: it did not run: %s",
              f.family, m.at.batch, m.knobs, m.at.length, m.error));
        else if (m.rejected)
          lines.push_back(absl::StrFormat(
              "%-19s batch %-3d rejected %s at %d: its logits differ from "
              "the default's by %g",
              f.family, m.at.batch, m.knobs, m.at.length, m.maxError));
        else
          byBatch[m.at.batch][m.at.length][m.knobs] = m.micros;
      }
    for (const Measurement &m : set.defaults)
      if (m.family == f.family)
        defaults[m.at.batch][m.at.length] = m.micros;
    for (auto &[batch, times] : byBatch) {
      TuningKey key{set.device, set.target,  set.driver, set.nvrtc,
                    f.family,   f.signature, batch};
      TuningEntry &entry = db.entry(key, set.source);
      entry.times = times;
      entry.buckets = mergeBuckets(entry.times);
      std::string line =
          absl::StrFormat("%-19s batch %-3d %d buckets:", f.family, batch,
                          entry.buckets.size());
      for (const TuningBucket &b : entry.buckets) {
        // The bucket's speedup: the default's time over the winner's,
        // summed over the lengths measured inside it.
        double mine = 0, theirs = 0;
        for (const auto &[length, candidates] : times)
          if (length >= b.from && length <= b.to && candidates.count(b.knobs) &&
              defaults[batch].count(length)) {
            mine += candidates.at(b.knobs);
            theirs += defaults[batch][length];
          }
        absl::StrAppendFormat(&line, " [%d, %d] %s (%.1f us", b.from, b.to,
                              b.knobs, b.micros);
        if (mine > 0)
          absl::StrAppendFormat(&line, ", %.2fx the default", theirs / mine);
        line += ")";
      }
      lines.push_back(line);
      for (const TuningEntry &model : db.entries)
        if (model.source == "cost-model" && model.key.arch == key.arch &&
            model.key.nvrtc == key.nvrtc && model.key.family == key.family &&
            model.key.signature == key.signature && model.key.batch == batch)
          lines.push_back(absl::StrFormat("%-19s batch %-3d %s", f.family,
                                          batch, modelLine(model, times)));
    }
  }
  return lines;
}

} // namespace kiln
