//===- RateLimiter.h - a token bucket per API key ---------------*- C++ -*-===//
//
// --rate-limit QPS[,BURST]: each API key (or, without keys, every client
// together) holds a bucket of BURST tokens that refills at QPS a second;
// a request takes one, and finds the bucket empty: 429, with the seconds
// until the next token in Retry-After.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_RATELIMITER_H
#define KILN_SERVE_RATELIMITER_H

#include "absl/status/statusor.h"

#include <chrono>
#include <map>
#include <string>

namespace kiln::serve {

struct RateLimit {
  double qps = 0;   // 0: no limit
  double burst = 0; // the bucket's size
};

/// "QPS" or "QPS,BURST" (burst defaults to max(1, QPS)); errors name
/// --rate-limit.
absl::StatusOr<RateLimit> parseRateLimit(const std::string &text);

class RateLimiter {
public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(RateLimit limit) : limit_(limit) {}
  /// Takes a token of `key`'s bucket at `now`: 0 when there was one, else
  /// the seconds until there will be (nothing is taken).
  double take(const std::string &key, Clock::time_point now = Clock::now());

private:
  struct Bucket {
    double tokens;
    Clock::time_point at;
  };
  RateLimit limit_;
  std::map<std::string, Bucket> buckets_; // by key (few: one per API key)
};

} // namespace kiln::serve

#endif // KILN_SERVE_RATELIMITER_H
