//===- RateLimiter.cpp ----------------------------------------------------===//
#include "serve/RateLimiter.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::serve {

absl::StatusOr<RateLimit> parseRateLimit(const std::string &text) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  RateLimit limit;
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--rate-limit: '", text,
                     "' is not QPS[,BURST] (requests a second > 0, a "
                     "bucket of >= 1)"));
  };
  if (parts.size() > 2 || !absl::SimpleAtod(parts[0], &limit.qps) ||
      !std::isfinite(limit.qps) || limit.qps <= 0)
    return bad();
  limit.burst = std::max(1.0, limit.qps);
  if (parts.size() == 2 && (!absl::SimpleAtod(parts[1], &limit.burst) ||
                            !std::isfinite(limit.burst) || limit.burst < 1))
    return bad();
  return limit;
}

double RateLimiter::take(const std::string &key, Clock::time_point now) {
  if (limit_.qps <= 0)
    return 0;
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{limit_.burst, now});
  Bucket &b = it->second;
  double elapsed = std::chrono::duration<double>(now - b.at).count();
  b.tokens = std::min(limit_.burst, b.tokens + elapsed * limit_.qps);
  b.at = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  return (1 - b.tokens) / limit_.qps;
}

} // namespace kiln::serve
