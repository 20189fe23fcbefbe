//===- Plot.cpp -----------------------------------------------------------===//
#include "tune/Plot.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln {

std::string plotEntry(const TuningEntry &entry) {
  constexpr double W = 760, H = 420, left = 70, right = 250, top = 40,
                   bottom = 50;
  const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c",
                          "#9467bd", "#ff7f0e", "#17becf"};
  // The lines: each bucket's winner, in bucket order, once.
  std::vector<std::string> lines;
  for (const TuningBucket &b : entry.buckets)
    if (std::find(lines.begin(), lines.end(), b.knobs) == lines.end() &&
        lines.size() < 6)
      lines.push_back(b.knobs);
  double xMin = 0, xMax = 1, yMin = 1e300, yMax = 0;
  if (!entry.times.empty()) {
    xMin = std::log2(double(entry.times.begin()->first));
    xMax = std::max(xMin + 1, std::log2(double(entry.times.rbegin()->first)));
  }
  for (const auto &[length, candidates] : entry.times)
    for (const std::string &knobs : lines)
      if (auto it = candidates.find(knobs); it != candidates.end()) {
        yMin = std::min(yMin, it->second);
        yMax = std::max(yMax, it->second);
      }
  if (yMax <= 0) {
    yMin = 1;
    yMax = 10;
  }
  double lo = std::floor(std::log10(yMin)), hi = std::ceil(std::log10(yMax));
  if (hi <= lo)
    hi = lo + 1;
  auto x = [&](double length) {
    return left +
           (std::log2(length) - xMin) / (xMax - xMin) * (W - left - right);
  };
  auto y = [&](double micros) {
    return top + (hi - std::log10(micros)) / (hi - lo) * (H - top - bottom);
  };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%g\" y=\"20\" font-size=\"14\">%s, batch %d (%s): time "
      "against sequence length</text>\n",
      W, H, left, entry.key.family, entry.key.batch, entry.source);
  // Axes, with a tick per tuned length and per decade.
  absl::StrAppendFormat(&svg,
                        "<path d=\"M%g %g V%g H%g\" stroke=\"black\" "
                        "fill=\"none\"/>\n",
                        left, top, H - bottom, W - right);
  for (const auto &[length, candidates] : entry.times)
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%g\" "
                          "text-anchor=\"middle\">%d</text>\n",
                          x(double(length)), H - bottom + 15, length);
  for (double d = lo; d <= hi; d += 1)
    absl::StrAppendFormat(
        &svg, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%g us</text>\n",
        left - 5, y(std::pow(10, d)) + 4, std::pow(10, d));
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">"
                        "sequence length (%s)</text>\n",
                        (left + W - right) / 2, H - 12,
                        entry.key.family.rfind("decode", 0) == 0 ? "keys"
                                                                 : "tokens");
  // Bucket boundaries: between a bucket's last length and the next one's.
  for (size_t i = 0; i + 1 < entry.buckets.size(); ++i) {
    auto next = entry.times.upper_bound(entry.buckets[i].to);
    if (next == entry.times.end())
      continue;
    double at = (x(double(entry.buckets[i].to)) + x(double(next->first))) / 2;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" "
                          "stroke=\"gray\" stroke-dasharray=\"4 3\"/>\n",
                          at, top, at, H - bottom);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string points;
    for (const auto &[length, candidates] : entry.times)
      if (auto it = candidates.find(lines[i]); it != candidates.end())
        absl::StrAppendFormat(&points, "%s%.1f,%.1f", points.empty() ? "" : " ",
                              x(double(length)), y(it->second));
    absl::StrAppendFormat(&svg,
                          "<polyline points=\"%s\" fill=\"none\" "
                          "stroke=\"%s\" stroke-width=\"2\"/>\n",
                          points, colors[i]);
    absl::StrAppendFormat(
        &svg, "<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n", W - right + 10,
        top + 16 * double(i), colors[i], lines[i]);
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"%g\">buckets (dashed):</text>\n",
                        W - right + 10, top + 16 * double(lines.size() + 1));
  for (size_t i = 0; i < entry.buckets.size(); ++i)
    absl::StrAppendFormat(
        &svg, "<text x=\"%g\" y=\"%g\">%d-%d: %s</text>\n", W - right + 10,
        top + 16 * double(lines.size() + 2 + i), entry.buckets[i].from,
        entry.buckets[i].to, entry.buckets[i].knobs);
  return svg + "</svg>\n";
}

} // namespace kiln
