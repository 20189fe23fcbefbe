//===- TimeCandidates.cpp -------------------------------------------------===//
#include "runtime/TimeCandidates.h"
#include "runtime/AtomicFile.h"
#include "runtime/Isolated.h"
#include "runtime/JsonRead.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kiln {
namespace {
using Json = nlohmann::json;
namespace fs = std::filesystem;

Json familyJson(const CandidateFamily &f, bool withCandidates) {
  Json cases = Json::array();
  for (const CandidateCase &c : f.cases)
    cases.push_back({{"length", c.length}, {"batch", c.batch}});
  Json j = {{"family", f.family},
            {"signature", f.signature},
            {"prompt", f.prompt},
            {"kernels", f.kernels},
            {"cases", cases}};
  if (withCandidates) {
    Json candidates = Json::array();
    for (const auto &c : f.candidates)
      candidates.push_back({{"knobs", c.knobs}, {"bundle", c.bundle}});
    j["candidates"] = candidates;
  }
  return j;
}

/// A bundle path inside the manifest's folder: relative, no "..".
bool insideFolder(const std::string &path) {
  fs::path p(path);
  if (path.empty() || p.is_absolute())
    return false;
  for (const fs::path &part : p)
    if (part == "..")
      return false;
  return true;
}

CandidateFamily readFamily(const Json &j, bool withCandidates) {
  CandidateFamily f;
  f.family = j.at("family").get<std::string>();
  f.signature = j.at("signature").get<std::string>();
  f.prompt = j.at("prompt").get<bool>();
  f.kernels = j.at("kernels").get<std::vector<std::string>>();
  for (const Json &c : j.at("cases")) {
    CandidateCase at{jsonInteger<int64_t>(c.at("length")),
                     jsonInteger<int64_t>(c.at("batch"))};
    if (at.length < 1 || at.batch < 1 || at.length > (1 << 24) ||
        at.batch > 4096)
      throw std::invalid_argument(absl::StrCat("family ", f.family,
                                               ": a case of length ", at.length,
                                               " and batch ", at.batch));
    f.cases.push_back(at);
  }
  if (withCandidates)
    for (const Json &c : j.at("candidates")) {
      CandidateFamily::Candidate k{c.at("knobs").get<std::string>(),
                                   c.at("bundle").get<std::string>()};
      if (!insideFolder(k.bundle))
        throw std::invalid_argument(
            absl::StrCat("family ", f.family, ": bundle '", k.bundle,
                         "' is not a path inside the manifest's folder"));
      f.candidates.push_back(k);
    }
  return f;
}

absl::StatusOr<Json> readJson(const std::string &path, const char *format) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat(path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a ", format, " file (not a JSON object)"));
  if (j.value("format", "") != format)
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a ", format, " file (no format '", format, "')"));
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() != kCandidatesVersion)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", format, " version ",
                     j.contains("version") ? j["version"].dump() : "none",
                     "; this kiln reads version ", kCandidatesVersion));
  return j;
}

absl::Status writeJson(const std::string &path, const Json &j) {
  return writeFileAtomically(path, j.dump(1) + "\n");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Token ids of sequence `seq`: fixed, spread over the vocabulary.
std::vector<int32_t> tokensOf(int64_t seq, int64_t count, int64_t vocab) {
  std::vector<int32_t> t(count);
  for (int64_t i = 0; i < count; ++i)
    t[i] = int32_t((seq * 7919 + i * 104729 + 1) % vocab);
  return t;
}

struct CaseResult {
  double micros = 0, stepMicros = 0;
  std::vector<float> logits; // the rows compared
};

/// Runs one case of `f` on `dev` (see TimeCandidates.h).
absl::StatusOr<CaseResult> runCase(PlanDevice &dev, const CandidateFamily &f,
                                   const CandidateCase &c, int64_t repeats) {
  const Program &p = dev.program();
  SamplingParams greedy;
  int64_t length = c.length, batch = f.prompt ? 1 : c.batch;
  // Keys held per sequence: the prompt, or the context and the new token.
  int64_t blocks =
      (length + (f.prompt ? 0 : 1) + p.blockSize - 1) / p.blockSize;
  std::string where =
      absl::StrCat(f.family, " at length ", length,
                   f.prompt ? "" : absl::StrCat(", batch ", batch));
  if (batch > p.sequences || blocks > p.tableBlocks ||
      batch * blocks > p.poolBlocks)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the bundle's KV pool holds ", p.sequences,
                     " sequences of ", p.tableBlocks * p.blockSize, " tokens"));
  if (f.prompt && length > p.prefill.back().rows)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the bundle's largest prefill plan holds ",
                     p.prefill.back().rows, " tokens"));
  for (int64_t s = 0; s < batch; ++s) {
    std::vector<int32_t> table(blocks);
    for (int64_t b = 0; b < blocks; ++b)
      table[b] = int32_t(s * blocks + b);
    if (absl::Status st = dev.setTable(int32_t(s), table); !st.ok())
      return st;
  }
  std::vector<BatchRow> rows;
  std::vector<int32_t> prompt = tokensOf(0, length, p.vocab);
  if (!f.prompt)
    for (int64_t s = 0; s < batch; ++s) {
      // The context, untimed; the step then adds token `length`.
      std::vector<int32_t> t = tokensOf(s, length + 1, p.vocab);
      if (auto st = dev.prefillSequence(int32_t(s), {t.data(), size_t(length)},
                                        0, greedy, false);
          !st.ok())
        return st.status();
      rows.push_back({int32_t(s), t[length], int32_t(length), greedy});
    }
  auto step = [&]() -> absl::Status {
    if (f.prompt)
      return dev.prefillSequence(0, prompt, 0, greedy, false).status();
    return dev.decodeBatch(rows, false).status();
  };
  if (absl::Status s = step(); !s.ok()) // warm-up: modules, cuBLAS's choice
    return s;
  std::vector<double> family, whole;
  for (int64_t r = 0; r < repeats; ++r) {
    if (absl::Status s = dev.flushCaches(); !s.ok())
      return s;
    StepTimes times;
    dev.timeLaunches(&times, &times);
    absl::Status s = step();
    dev.timeLaunches(nullptr, nullptr);
    if (!s.ok())
      return s;
    double mine = 0, all = 0;
    for (const auto &[kernel, stats] : times.kernels) {
      all += stats.micros;
      if (std::find(f.kernels.begin(), f.kernels.end(), kernel) !=
          f.kernels.end())
        mine += stats.micros;
    }
    family.push_back(mine);
    whole.push_back(all);
  }
  CaseResult out{median(family), median(whole), {}};
  for (int64_t row = f.prompt ? length - 1 : 0;
       row < (f.prompt ? length : batch); ++row) {
    auto logits = dev.lastLogits(row);
    if (!logits.ok())
      return logits.status();
    out.logits.insert(out.logits.end(), logits->begin(), logits->end());
  }
  return out;
}

/// Results of a bundle's cases, [family][case], as bytes (from a child
/// process) and back: per family its case count, per case the two times
/// and the logits.
std::string encodeResults(const std::vector<std::vector<CaseResult>> &r) {
  std::string out;
  auto put = [&](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  for (const auto &family : r) {
    uint64_t cases = family.size();
    put(&cases, 8);
    for (const CaseResult &c : family) {
      uint64_t floats = c.logits.size();
      put(&c.micros, 8);
      put(&c.stepMicros, 8);
      put(&floats, 8);
      put(c.logits.data(), floats * 4);
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<CaseResult>>>
decodeResults(const std::string &bytes, size_t families) {
  std::vector<std::vector<CaseResult>> r(families);
  size_t at = 0;
  auto get = [&](void *p, size_t n) {
    if (bytes.size() - at < n)
      return false;
    std::memcpy(p, bytes.data() + at, n);
    at += n;
    return true;
  };
  for (auto &family : r) {
    uint64_t cases = 0;
    if (!get(&cases, 8) || cases > bytes.size())
      return absl::InternalError("a child's results are cut short");
    family.resize(cases);
    for (CaseResult &c : family) {
      uint64_t floats = 0;
      if (!get(&c.micros, 8) || !get(&c.stepMicros, 8) || !get(&floats, 8) ||
          floats > bytes.size())
        return absl::InternalError("a child's results are cut short");
      c.logits.resize(floats);
      if (!get(c.logits.data(), floats * 4))
        return absl::InternalError("a child's results are cut short");
    }
  }
  return r;
}

/// The largest difference from `reference`; NaN when either has one.
double maxError(const std::vector<float> &got,
                const std::vector<float> &reference) {
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < reference.size(); ++i) {
    double d = std::fabs(double(got[i]) - double(reference[i]));
    if (!(d <= worst)) // NaN sticks
      worst = d;
  }
  return got.size() == reference.size() ? worst : NAN;
}

double scaleOf(const std::vector<float> &reference) {
  double most = 1;
  for (float v : reference)
    most = std::max(most, double(std::fabs(v)));
  return most;
}
} // namespace

absl::Status writeCandidateSet(const std::string &path,
                               const CandidateSet &set) {
  Json families = Json::array();
  for (const CandidateFamily &f : set.families)
    families.push_back(familyJson(f, true));
  return writeJson(path, {{"format", kCandidatesFormat},
                          {"version", kCandidatesVersion},
                          {"model", set.model},
                          {"target", set.target},
                          {"nvrtc", set.nvrtc},
                          {"reference", set.reference},
                          {"families", families}});
}

absl::StatusOr<CandidateSet> readCandidateSet(const std::string &path) {
  auto j = readJson(path, kCandidatesFormat);
  if (!j.ok())
    return j.status();
  try {
    CandidateSet set;
    set.model = j->at("model").get<std::string>();
    set.target = j->at("target").get<std::string>();
    set.nvrtc = j->at("nvrtc").get<std::string>();
    set.reference = j->at("reference").get<std::string>();
    if (!insideFolder(set.reference))
      throw std::invalid_argument("the reference bundle is not a path inside "
                                  "the manifest's folder");
    for (const Json &f : j->at("families"))
      set.families.push_back(readFamily(f, true));
    return set;
  } catch (const std::exception &e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a damaged candidate manifest: ", jsonErrorMessage(e)));
  }
}

absl::Status writeMeasurementSet(const std::string &path,
                                 const MeasurementSet &set) {
  Json families = Json::array();
  for (const CandidateFamily &f : set.families)
    families.push_back(familyJson(f, false));
  auto rows = [](const std::vector<Measurement> &ms, bool candidates) {
    Json out = Json::array();
    for (const Measurement &m : ms) {
      Json j = {{"family", m.family},
                {"length", m.at.length},
                {"batch", m.at.batch},
                {"micros", m.micros},
                {"step_micros", m.stepMicros}};
      if (candidates) {
        j["knobs"] = m.knobs;
        // JSON has no NaN: a NaN error is written as -1 (and rejected).
        j["max_error"] = std::isnan(m.maxError) ? -1.0 : m.maxError;
        j["rejected"] = m.rejected;
        if (!m.error.empty())
          j["error"] = m.error;
      }
      out.push_back(j);
    }
    return out;
  };
  return writeJson(path, {{"format", kMeasurementsFormat},
                          {"version", kCandidatesVersion},
                          {"model", set.model},
                          {"target", set.target},
                          {"nvrtc", set.nvrtc},
                          {"device", set.device},
                          {"driver", set.driver},
                          {"source", set.source},
                          {"repeats", set.repeats},
                          {"families", families},
                          {"defaults", rows(set.defaults, false)},
                          {"candidates", rows(set.candidates, true)}});
}

absl::StatusOr<MeasurementSet> readMeasurementSet(const std::string &path) {
  auto j = readJson(path, kMeasurementsFormat);
  if (!j.ok())
    return j.status();
  try {
    MeasurementSet set;
    for (auto [field, value] : {std::pair{"model", &set.model},
                                {"target", &set.target},
                                {"nvrtc", &set.nvrtc},
                                {"device", &set.device},
                                {"driver", &set.driver},
                                {"source", &set.source}})
      *value = j->at(field).get<std::string>();
    set.repeats = jsonInteger<int64_t>(j->at("repeats"));
    for (const Json &f : j->at("families"))
      set.families.push_back(readFamily(f, false));
    auto rows = [&](const char *name, bool candidates) {
      std::vector<Measurement> out;
      for (const Json &r : j->at(name)) {
        Measurement m;
        m.family = r.at("family").get<std::string>();
        m.at = {jsonInteger<int64_t>(r.at("length")),
                jsonInteger<int64_t>(r.at("batch"))};
        m.micros = r.at("micros").get<double>();
        m.stepMicros = r.at("step_micros").get<double>();
        if (!(m.micros >= 0) || !(m.stepMicros >= 0))
          throw std::invalid_argument(
              absl::StrCat("a time of ", m.micros, " us for ", m.family));
        if (candidates) {
          m.knobs = r.at("knobs").get<std::string>();
          m.maxError = r.at("max_error").get<double>();
          m.rejected = r.at("rejected").get<bool>();
          m.error = r.value("error", "");
          if (!m.error.empty() && !m.rejected)
            throw std::invalid_argument(absl::StrCat(
                "a candidate of ", m.family, " failed and is not rejected"));
        }
        out.push_back(m);
      }
      return out;
    };
    set.defaults = rows("defaults", false);
    set.candidates = rows("candidates", true);
    return set;
  } catch (const std::exception &e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a damaged measurements file: ", jsonErrorMessage(e)));
  }
}

absl::StatusOr<MeasurementSet> timeCandidates(const std::string &path,
                                              const DeviceFactory &open,
                                              const TimingOptions &options) {
  auto set = readCandidateSet(path);
  if (!set.ok())
    return set.status();
  fs::path dir = fs::path(path).parent_path();
  MeasurementSet out{set->model,
                     set->target,
                     set->nvrtc,
                     options.device,
                     options.driver,
                     options.source,
                     options.repeats,
                     {},
                     {},
                     {}};
  for (CandidateFamily f : set->families) {
    f.candidates.clear();
    out.families.push_back(std::move(f));
  }
  int64_t total = 1, done = 0;
  for (const CandidateFamily &f : set->families)
    total += int64_t(f.candidates.size());
  // Every bundle is there before any device time is spent.
  std::vector<std::string> files = {set->reference};
  for (const CandidateFamily &f : set->families)
    for (const auto &c : f.candidates)
      files.push_back(c.bundle);
  for (const std::string &file : files)
    if (!fs::is_regular_file(dir / file))
      return absl::NotFoundError(absl::StrCat(
          (dir / file).string(), ": the manifest names it; it is missing"));

  // Runs the cases of `families` on the bundle at `file`: [family][case].
  using Results = std::vector<std::vector<CaseResult>>;
  auto runHere = [&](const std::string &file,
                     const std::vector<const CandidateFamily *> &families)
      -> absl::StatusOr<Results> {
    std::string where = (dir / file).string();
    auto bundle = readBundle(where);
    if (!bundle.ok())
      return bundle.status();
    if (bundle->model != set->model)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": compiled from ", bundle->model,
                       ", the manifest is for ", set->model));
    auto dev = open(*bundle);
    if (!dev.ok())
      return dev.status();
    Results results;
    for (const CandidateFamily *f : families) {
      results.emplace_back();
      for (const CandidateCase &c : f->cases) {
        auto r = runCase(**dev, *f, c, options.repeats);
        if (!r.ok())
          return absl::Status(r.status().code(),
                              absl::StrCat(where, ": ", r.status().message()));
        results.back().push_back(std::move(*r));
      }
    }
    return results;
  };
  auto runBundle = [&](const std::string &file,
                       const std::vector<const CandidateFamily *> &families,
                       const std::string &what) -> absl::StatusOr<Results> {
    if (options.progress)
      options.progress(done++, total, what);
    if (!options.isolate)
      return runHere(file, families);
    auto bytes = runIsolated([&]() -> absl::StatusOr<std::string> {
      auto r = runHere(file, families);
      if (!r.ok())
        return r.status();
      return encodeResults(*r);
    });
    std::string where = (dir / file).string();
    if (!bytes.ok() && !absl::StartsWith(bytes.status().message(), where))
      // How the child died, not an error it answered with.
      return absl::Status(bytes.status().code(),
                          absl::StrCat(where, ": ", bytes.status().message()));
    if (!bytes.ok())
      return bytes.status();
    return decodeResults(*bytes, families.size());
  };

  // The default bundle runs every family's cases: the reference logits, and
  // the times a tuned bundle is compared with.
  std::vector<const CandidateFamily *> all;
  for (const CandidateFamily &f : set->families)
    all.push_back(&f);
  auto reference = runBundle(set->reference, all, "the default knobs");
  if (!reference.ok())
    return reference.status();
  for (size_t fi = 0; fi < all.size(); ++fi)
    for (size_t i = 0; i < all[fi]->cases.size(); ++i) {
      const CaseResult &r = (*reference)[fi][i];
      out.defaults.push_back({all[fi]->family, "", all[fi]->cases[i], r.micros,
                              r.stepMicros, 0, false, ""});
    }
  if (options.partial)
    options.partial(out);
  for (size_t fi = 0; fi < all.size(); ++fi) {
    const CandidateFamily &f = *all[fi];
    for (const auto &candidate : f.candidates) {
      auto r =
          runBundle(candidate.bundle, {&f}, f.family + " " + candidate.knobs);
      if (!r.ok()) {
        // A candidate that does not run (a damaged bundle, a launch the GPU
        // refuses, a fault) is rejected with its reason; the others are
        // still measured. Its device is gone, and with it the context a
        // fault would have broken.
        for (const CandidateCase &at : f.cases)
          out.candidates.push_back({f.family, candidate.knobs, at, 0, 0, NAN,
                                    true, std::string(r.status().message())});
        if (options.partial)
          options.partial(out);
        continue;
      }
      for (size_t i = 0; i < f.cases.size(); ++i) {
        const CaseResult &got = (*r)[0][i];
        const std::vector<float> &want = (*reference)[fi][i].logits;
        double error = maxError(got.logits, want);
        // NaN compares false: rejected.
        bool rejected = !(error <= kCandidateTolerance * scaleOf(want));
        out.candidates.push_back({f.family, candidate.knobs, f.cases[i],
                                  got.micros, got.stepMicros, error, rejected,
                                  ""});
      }
      if (options.partial)
        options.partial(out);
    }
  }
  if (options.progress)
    options.progress(total, total, "");
  return out;
}

} // namespace kiln
