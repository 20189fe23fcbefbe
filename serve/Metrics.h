//===- Metrics.h - a server's counters in Prometheus text -------*- C++ -*-===//
//
// Counters, gauges and histograms by family and labels, safe to touch from
// the HTTP thread and the engines' threads, written in Prometheus' text
// format for GET /metrics (docs/serve.md lists the families).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_METRICS_H
#define KILN_SERVE_METRICS_H

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::serve {

/// {name, value} pairs, in the order they print.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
public:
  Metrics();
  /// counter += amount
  void add(const std::string &family, const Labels &labels, double amount = 1);
  /// gauge = value
  void set(const std::string &family, const Labels &labels, double value);
  /// One sample of a histogram (seconds).
  void observe(const std::string &family, const Labels &labels, double seconds);
  /// A counter's or gauge's value (0 when never touched); a histogram's
  /// count of samples.
  double value(const std::string &family, const Labels &labels) const;
  /// Every family, in Prometheus' text exposition format 0.0.4.
  std::string text() const;

private:
  struct Histogram {
    std::vector<double> counts; // [buckets]: samples <= each bound
    double sum = 0;
    double count = 0;
  };
  struct Family {
    std::string type, help;
    std::map<std::string, double> values;        // by rendered labels
    std::map<std::string, Histogram> histograms; // by rendered labels
  };
  Family &family(const std::string &name);
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
  std::vector<double> bounds_; // the histograms' upper bounds, seconds
};

} // namespace kiln::serve

#endif // KILN_SERVE_METRICS_H
