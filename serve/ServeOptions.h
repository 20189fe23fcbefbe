//===- ServeOptions.h - kiln serve's flags ----------------------*- C++ -*-===//
//
// The server's flags, read the same way by `kiln serve` and `kiln-run
// --serve` (each tool opens its models its own way and hands them over
// as loaders), and the server's entry point. docs/serve.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_SERVEOPTIONS_H
#define KILN_SERVE_SERVEOPTIONS_H

#include "runtime/PlanDevice.h"
#include "runtime/TextTokenizer.h"
#include "serve/RateLimiter.h"

#include "absl/status/statusor.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (printed)
  std::vector<std::string> apiKeys; // empty: no key asked
  RateLimit rateLimit;              // per key
  int64_t maxQueue = 64;            // waiting requests a model holds
  int64_t maxTokensCap = 0;         // 0: only the context caps max_tokens
  int64_t maxBodyBytes = 1 << 20;
  double drainSeconds = 30;
  double probeSeconds = 30;
  int64_t maxBatch = 0; // 0: the bundle's sequence slots
  std::chrono::milliseconds stepDelay{0};
  std::string servedName;         // the model's name for clients
  std::string fallbackServedName; // the fallback's
};

/// The flags this file owns, each with a value; the last is {nullptr}.
struct ServeFlag {
  const char *name, *help;
};
extern const ServeFlag kServeFlags[];
/// Sets flag `name` (without "--") to `value`: NotFound when `name` is not
/// one of kServeFlags, InvalidArgument naming the flag for a bad value.
absl::Status setServeFlag(ServeOptions &options, const std::string &name,
                          const std::string &value);
/// The usage text of the flags.
extern const char *const kServeUsage;

/// A model opened for serving.
struct LoadedModel {
  std::string name; // the bundle's or the model's
  std::unique_ptr<PlanDevice> device;
  std::unique_ptr<TextTokenizer> tokenizer; // null: token ids only
};
/// Opens a model (on the server's loading thread, while /health says 503).
using ModelLoader = std::function<absl::StatusOr<LoadedModel>()>;

/// Listens, loads `main` (and `fallback` when set), serves until SIGTERM
/// or SIGINT, then drains. Returns the exit code: 0 after a drain, 1 when
/// the address or a model fails.
int serve(const ServeOptions &options, const ModelLoader &main,
          const ModelLoader &fallback);

} // namespace kiln::serve

#endif // KILN_SERVE_SERVEOPTIONS_H
