//===- Metrics.cpp --------------------------------------------------------===//
#include "serve/Metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cstdlib>

namespace kiln::serve {
namespace {

struct Description {
  const char *name, *type, *help;
};

// Every family the server writes: a family never touched still prints its
// HELP and TYPE, so a scraper sees the whole set from the start.
constexpr Description kFamilies[] = {
    {"kiln_requests_running", "gauge", "Requests in the running batch."},
    {"kiln_requests_waiting", "gauge",
     "Requests queued for a sequence slot or KV blocks."},
    {"kiln_requests_total", "counter",
     "Requests that ended, by how (stop, length, cancelled, error)."},
    {"kiln_prompt_tokens_total", "counter", "Prompt tokens prefilled."},
    {"kiln_generation_tokens_total", "counter", "Tokens generated."},
    {"kiln_time_to_first_token_seconds", "histogram",
     "From a request's arrival to its first generated token."},
    {"kiln_inter_token_latency_seconds", "histogram",
     "Between successive generated tokens of a request."},
    {"kiln_kv_blocks_used", "gauge", "KV pool blocks held by sequences."},
    {"kiln_kv_blocks_total", "gauge", "KV pool blocks in all."},
    {"kiln_device_healthy", "gauge",
     "1 while the device answers its probes, 0 after 5 failures in a row."},
    {"kiln_device_memory_free_bytes", "gauge",
     "Free device memory at the last probe (cuda)."},
    {"kiln_device_failures_total", "counter",
     "Failed device steps and probes."},
    {"kiln_fallback_requests_total", "counter",
     "Requests sent to the fallback model."},
    {"kiln_errors_total", "counter", "Requests refused or failed, by kind."},
};

std::string render(const Labels &labels) {
  if (labels.empty())
    return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", labels[i].first, "=\"");
    for (char c : labels[i].second) { // the format's three escapes
      if (c == '\\' || c == '"')
        out += '\\';
      out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    out += '"';
  }
  return out + "}";
}

std::string number(double v) { return absl::StrFormat("%.15g", v); }

/// `rendered` labels with one more (le="...") inside the braces.
std::string withBound(const std::string &rendered, const std::string &le) {
  std::string bound = absl::StrCat("le=\"", le, "\"");
  if (rendered.empty())
    return absl::StrCat("{", bound, "}");
  return absl::StrCat(rendered.substr(0, rendered.size() - 1), ",", bound, "}");
}

} // namespace

Metrics::Metrics()
    // Latencies from a millisecond (a tiny model on loopback) to a minute.
    : bounds_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
               5, 10, 30, 60}) {
  for (const Description &d : kFamilies)
    families_[d.name] = {d.type, d.help, {}, {}};
}

Metrics::Family &Metrics::family(const std::string &name) {
  auto it = families_.find(name);
  if (it == families_.end()) // a name not in kFamilies: a bug of the caller
    std::abort();
  return it->second;
}

void Metrics::add(const std::string &name, const Labels &labels,
                  double amount) {
  std::lock_guard<std::mutex> lock(mutex_);
  family(name).values[render(labels)] += amount;
}

void Metrics::set(const std::string &name, const Labels &labels, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  family(name).values[render(labels)] = value;
}

void Metrics::observe(const std::string &name, const Labels &labels,
                      double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  Histogram &h = family(name).histograms[render(labels)];
  h.counts.resize(bounds_.size());
  for (size_t i = 0; i < bounds_.size(); ++i)
    h.counts[i] += seconds <= bounds_[i];
  h.sum += seconds;
  h.count += 1;
}

double Metrics::value(const std::string &name, const Labels &labels) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Family &f = families_.at(name);
  std::string key = render(labels);
  if (auto h = f.histograms.find(key); h != f.histograms.end())
    return h->second.count;
  auto v = f.values.find(key);
  return v == f.values.end() ? 0 : v->second;
}

std::string Metrics::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const auto &[name, f] : families_) {
    absl::StrAppend(&out, "# HELP ", name, " ", f.help, "\n# TYPE ", name, " ",
                    f.type, "\n");
    for (const auto &[labels, v] : f.values)
      absl::StrAppend(&out, name, labels, " ", number(v), "\n");
    for (const auto &[labels, h] : f.histograms) {
      for (size_t i = 0; i < bounds_.size(); ++i)
        absl::StrAppend(&out, name, "_bucket",
                        withBound(labels, number(bounds_[i])), " ",
                        number(h.counts[i]), "\n");
      absl::StrAppend(&out, name, "_bucket", withBound(labels, "+Inf"), " ",
                      number(h.count), "\n", name, "_sum", labels, " ",
                      number(h.sum), "\n", name, "_count", labels, " ",
                      number(h.count), "\n");
    }
  }
  return out;
}

} // namespace kiln::serve
