//===- TuningDb.cpp -------------------------------------------------------===//
#include "tune/TuningDb.h"
#include "runtime/AtomicFile.h"
#include "runtime/JsonRead.h"

#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {
using Json = nlohmann::json;
const char *kFormat = "kiln-tuning-db";
} // namespace

std::string TuningKey::str() const {
  return absl::StrCat(family, " (batch ", batch, ") on ", gpu, ", ", arch,
                      ", driver ", driver, ", NVRTC ", nvrtc, ", signature ",
                      signature);
}

TuningEntry &TuningDb::entry(const TuningKey &key, const std::string &source) {
  for (TuningEntry &e : entries)
    if (e.key == key && e.source == source)
      return e;
  entries.push_back({key, source, {}, {}});
  return entries.back();
}

const TuningEntry *TuningDb::find(const TuningKey &key) const {
  for (const TuningEntry &e : entries)
    if (e.key == key)
      return &e;
  return nullptr;
}

std::vector<TuningBucket>
mergeBuckets(const std::map<int64_t, std::map<std::string, double>> &times,
             double slack) {
  std::vector<int64_t> lengths;
  std::vector<double> best; // [lengths]: the least time at each
  for (const auto &[length, candidates] : times) {
    if (candidates.empty())
      continue;
    double least = candidates.begin()->second;
    for (const auto &[knobs, t] : candidates)
      least = std::min(least, t);
    lengths.push_back(length);
    best.push_back(least);
  }
  // Whether `knobs` is within the slack of the best at lengths[i].
  auto good = [&](const std::string &knobs, size_t i) {
    const auto &candidates = times.at(lengths[i]);
    auto it = candidates.find(knobs);
    return it != candidates.end() && it->second <= (1 + slack) * best[i];
  };
  std::vector<TuningBucket> buckets;
  for (size_t i = 0; i < lengths.size();) {
    // Of the candidates good here, the one that stays good the longest;
    // then the faster here; then the knobs that sort first (the map's
    // order): the same times always give the same buckets.
    std::string winner;
    size_t reach = 0;
    double at = 0;
    for (const auto &[knobs, t] : times.at(lengths[i])) {
      if (!good(knobs, i))
        continue;
      size_t end = i;
      while (end < lengths.size() && good(knobs, end))
        ++end;
      if (end > reach || (end == reach && t < at)) {
        winner = knobs;
        reach = end;
        at = t;
      }
    }
    int64_t from = buckets.empty() ? 1 : buckets.back().to + 1;
    buckets.push_back({from, lengths[reach - 1], winner,
                       times.at(lengths[reach - 1]).at(winner)});
    i = reach;
  }
  return buckets;
}

absl::StatusOr<TuningDb> readTuningDb(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return TuningDb(); // nothing tuned yet
  std::stringstream text;
  text << in.rdbuf();
  auto fault = [&](const std::string &what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  TuningDb db;
  try {
    Json j = Json::parse(text.str());
    if (!j.is_object() || j.value("format", "") != kFormat)
      return fault("not a kiln tuning database (no format 'kiln-tuning-db')");
    if (!j.at("version").is_number_integer() ||
        j.at("version").get<int64_t>() != kTuningDbVersion)
      return fault(absl::StrCat("tuning database version ",
                                j.at("version").dump(), "; this kiln reads ",
                                kTuningDbVersion, ": tune again"));
    for (const Json &e : j.at("entries")) {
      TuningEntry entry;
      const Json &k = e.at("key");
      entry.key = {k.at("gpu").get<std::string>(),
                   k.at("arch").get<std::string>(),
                   k.at("driver").get<std::string>(),
                   k.at("nvrtc").get<std::string>(),
                   k.at("family").get<std::string>(),
                   k.at("signature").get<std::string>(),
                   jsonInteger<int64_t>(k.at("batch"))};
      entry.source = e.at("source").get<std::string>();
      if (entry.key.batch < 1)
        return fault(absl::StrCat("an entry of ", entry.key.family,
                                  " has batch ", entry.key.batch));
      for (const Json &point : e.at("times")) {
        int64_t length = jsonInteger<int64_t>(point.at("seq_len"));
        if (length < 1 || entry.times.count(length))
          return fault(absl::StrCat("an entry of ", entry.key.family,
                                    " has sequence length ", length,
                                    " twice or below 1"));
        auto &candidates = entry.times[length];
        for (const auto &[knobs, micros] : point.at("micros").items()) {
          double t = micros.get<double>();
          if (!std::isfinite(t) || t < 0)
            return fault(
                absl::StrCat("a time of ", t, " us in ", entry.key.family));
          candidates[knobs] = t;
        }
      }
      int64_t previous = 0;
      for (const Json &b : e.at("buckets")) {
        TuningBucket bucket{jsonInteger<int64_t>(b.at("from")),
                            jsonInteger<int64_t>(b.at("to")),
                            b.at("knobs").get<std::string>(),
                            b.at("micros").get<double>()};
        if (bucket.from != previous + 1 || bucket.to < bucket.from)
          return fault(absl::StrCat("the buckets of ", entry.key.family,
                                    " do not follow each other from 1"));
        previous = bucket.to;
        entry.buckets.push_back(std::move(bucket));
      }
      db.entries.push_back(std::move(entry));
    }
  } catch (const std::exception &e) {
    return fault(
        absl::StrCat("malformed tuning database: ", jsonErrorMessage(e)));
  }
  return db;
}

absl::Status writeTuningDb(const std::string &path, const TuningDb &db) {
  Json entries = Json::array();
  for (const TuningEntry &e : db.entries) {
    Json times = Json::array(), buckets = Json::array();
    for (const auto &[length, candidates] : e.times)
      times.push_back({{"seq_len", length}, {"micros", candidates}});
    for (const TuningBucket &b : e.buckets)
      buckets.push_back({{"from", b.from},
                         {"to", b.to},
                         {"knobs", b.knobs},
                         {"micros", b.micros}});
    const TuningKey &k = e.key;
    entries.push_back({{"key",
                        {{"gpu", k.gpu},
                         {"arch", k.arch},
                         {"driver", k.driver},
                         {"nvrtc", k.nvrtc},
                         {"family", k.family},
                         {"signature", k.signature},
                         {"batch", k.batch}}},
                       {"source", e.source},
                       {"buckets", buckets},
                       {"times", times}});
  }
  Json j = {
      {"format", kFormat}, {"version", kTuningDbVersion}, {"entries", entries}};
  return writeFileAtomically(path, j.dump(1) + "\n");
}

} // namespace kiln
