//===- ServeOptions.cpp - the flags, and the server's main loop -----------===//
#include "serve/ServeOptions.h"

#include "serve/Engine.h"
#include "serve/Metrics.h"
#include "serve/Server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace kiln::serve {

const ServeFlag kServeFlags[] = {
    {"host", "The address to listen on (default 127.0.0.1)"},
    {"port", "The port (default 8000; 0: a free one, printed)"},
    {"api-key", "KEY[,KEY...]: required as 'Authorization: Bearer KEY' on "
                "/v1/*"},
    {"rate-limit", "QPS[,BURST]: a token bucket per API key (429 past it)"},
    {"max-queue", "Requests a model holds waiting (default 64; 429 past it)"},
    {"max-tokens-cap", "The most tokens one request generates (default: "
                       "the context)"},
    {"max-body-bytes", "The largest request body (default 1048576; 413 "
                       "past it)"},
    {"drain-seconds", "After SIGTERM, how long running requests may finish "
                      "(default 30)"},
    {"probe-seconds", "The device health probe's period (default 30)"},
    {"step-delay-ms", "Sleeps after every step (tests of the guards only)"},
    {"served-model-name", "The model's name for clients (default: its "
                          "folder's)"},
    {"fallback-served-model-name", "The fallback model's name for clients"},
    {nullptr, nullptr}};

const char *const kServeUsage =
    "[--host 127.0.0.1] [--port 8000] [--api-key KEY[,KEY...]] "
    "[--rate-limit QPS[,BURST]] [--max-queue N] [--max-tokens-cap N] "
    "[--max-body-bytes N] [--drain-seconds S] [--probe-seconds S] "
    "[--served-model-name NAME] [--fallback MODEL "
    "[--fallback-served-model-name NAME]] [--max-batch B]";

absl::Status setServeFlag(ServeOptions &o, const std::string &name,
                          const std::string &value) {
  auto bad = [&](const std::string &want) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", value, "' is not ", want));
  };
  auto count = [&](int64_t lo, int64_t hi, int64_t &out) {
    int64_t v;
    if (!absl::SimpleAtoi(value, &v) || v < lo || v > hi)
      return bad(absl::StrCat("an integer in [", lo, ", ", hi, "]"));
    out = v;
    return absl::OkStatus();
  };
  auto seconds = [&](double &out) {
    double v;
    if (!absl::SimpleAtod(value, &v) || !std::isfinite(v) || v < 0 || v > 86400)
      return bad("a number of seconds in [0, 86400]");
    out = v;
    return absl::OkStatus();
  };
  if (name == "host") {
    if (value.empty())
      return bad("an address");
    o.host = value;
    return absl::OkStatus();
  }
  if (name == "port") {
    int64_t port;
    if (absl::Status s = count(0, 65535, port); !s.ok())
      return s;
    o.port = int(port);
    return absl::OkStatus();
  }
  if (name == "api-key") {
    o.apiKeys = absl::StrSplit(value, ',', absl::SkipEmpty());
    if (o.apiKeys.empty())
      return bad("a key");
    return absl::OkStatus();
  }
  if (name == "rate-limit") {
    auto limit = parseRateLimit(value);
    if (!limit.ok())
      return limit.status();
    o.rateLimit = *limit;
    return absl::OkStatus();
  }
  if (name == "max-queue")
    return count(1, 1 << 20, o.maxQueue);
  if (name == "max-tokens-cap")
    return count(0, INT32_MAX, o.maxTokensCap);
  if (name == "max-body-bytes")
    return count(1024, int64_t(1) << 30, o.maxBodyBytes);
  if (name == "drain-seconds")
    return seconds(o.drainSeconds);
  if (name == "probe-seconds") {
    if (absl::Status s = seconds(o.probeSeconds); !s.ok())
      return s;
    return o.probeSeconds > 0 ? absl::OkStatus() : bad("more than 0 seconds");
  }
  if (name == "step-delay-ms") {
    int64_t ms;
    if (absl::Status s = count(0, 10000, ms); !s.ok())
      return s;
    o.stepDelay = std::chrono::milliseconds(ms);
    return absl::OkStatus();
  }
  if (name == "served-model-name" || name == "fallback-served-model-name") {
    if (value.empty())
      return bad("a name");
    (name == "served-model-name" ? o.servedName : o.fallbackServedName) = value;
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("--", name, " is not a serve flag"));
}

namespace {

/// A loaded model with its engine, named for clients.
absl::StatusOr<std::unique_ptr<ServedModel>>
openServed(const ModelLoader &load, const std::string &name,
           const ServeOptions &options, Metrics &metrics) {
  auto loaded = load();
  if (!loaded.ok())
    return loaded.status();
  auto m = std::make_unique<ServedModel>();
  m->loaded = std::move(*loaded);
  EngineOptions e;
  // A bundle records the model as compiled: a folder's path, or a preset.
  e.model = name.empty() ? std::filesystem::path(m->loaded.name)
                               .lexically_normal()
                               .filename()
                               .string()
                         : name;
  if (e.model.empty()) // a path that ends in "/"
    e.model = std::filesystem::path(m->loaded.name)
                  .lexically_normal()
                  .parent_path()
                  .filename()
                  .string();
  e.maxQueue = options.maxQueue;
  e.maxBatch = options.maxBatch;
  e.probeInterval = std::chrono::milliseconds(
      int64_t(std::llround(options.probeSeconds * 1000)));
  e.stepDelay = options.stepDelay;
  m->engine = std::make_unique<Engine>(*m->loaded.device, e, metrics);
  m->info.name = e.model;
  m->info.vocab = m->loaded.device->program().vocab;
  m->info.context = m->engine->context();
  m->info.tokenizer = m->loaded.tokenizer.get();
  if (m->info.tokenizer)
    m->info.eos = m->info.tokenizer->eos();
  return m;
}

} // namespace

int serve(const ServeOptions &options, const ModelLoader &main,
          const ModelLoader &fallback) {
  namespace asio = boost::asio;
  asio::io_context io(1);
  Metrics metrics;
  Server server(io, options, metrics);
  auto at = server.listen();
  if (!at.ok()) {
    std::fprintf(stderr, "kiln serve: error: %s\n",
                 std::string(at.status().message()).c_str());
    return 1;
  }
  // Tests and scripts read the port (--port 0) from this line.
  std::printf("kiln serve: listening on http://%s:%d\n",
              at->address().to_string().c_str(), int(at->port()));
  std::fflush(stdout);
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code &ec, int) {
    if (!ec)
      server.drain();
  });
  // Declared after the server: destroyed first, their threads stopped
  // while the sessions they post to still exist.
  std::unique_ptr<ServedModel> mainModel, fallbackModel;
  int code = 0;
  std::thread loader([&] {
    auto m = openServed(main, options.servedName, options, metrics);
    absl::StatusOr<std::unique_ptr<ServedModel>> f =
        std::unique_ptr<ServedModel>();
    if (m.ok() && fallback)
      f = openServed(fallback, options.fallbackServedName, options, metrics);
    if (m.ok() && f.ok() && *f && (*f)->info.name == (*m)->info.name)
      f = absl::InvalidArgumentError(absl::StrCat(
          "--fallback: has the main model's name '", (*m)->info.name,
          "' (--fallback-served-model-name names it)"));
    asio::post(io, [&, m = std::move(m), f = std::move(f)]() mutable {
      if (!m.ok() || !f.ok()) {
        std::fprintf(
            stderr, "kiln serve: error: %s\n",
            std::string((m.ok() ? f.status() : m.status()).message()).c_str());
        code = 1;
        return io.stop();
      }
      mainModel = std::move(*m);
      fallbackModel = std::move(*f);
      server.ready(mainModel.get(), fallbackModel.get());
      std::fprintf(
          stderr, "kiln serve: ready: %s on %s%s\n",
          mainModel->info.name.c_str(),
          mainModel->loaded.device->name().c_str(),
          fallbackModel
              ? absl::StrCat(", fallback ", fallbackModel->info.name).c_str()
              : "");
    });
  });
  io.run();
  loader.join();
  return code;
}

} // namespace kiln::serve
