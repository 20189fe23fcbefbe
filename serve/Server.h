//===- Server.h - the OpenAI-compatible HTTP server -------------*- C++ -*-===//
//
// Boost.Beast on one Asio thread: every connection is a Session of
// callbacks, so an open stream holds no thread (docs/serve.md says why
// Beast and not cpp-httplib). Requests pass the guards (state, API key,
// rate limit, body size), become scheduler requests of an Engine (the
// main model, or the fallback while the main queue is above 80%), and
// their tokens come back from the engine's thread by asio::post.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_SERVER_H
#define KILN_SERVE_SERVER_H

#include "serve/ApiError.h"
#include "serve/Engine.h"
#include "serve/Metrics.h"
#include "serve/OpenAiRequest.h"
#include "serve/RateLimiter.h"
#include "serve/ServeOptions.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <optional>

namespace kiln::serve {

/// A model the server answers for: its device, tokenizer and engine.
struct ServedModel {
  LoadedModel loaded;
  ModelInfo info;
  std::unique_ptr<Engine> engine;
};

class Session;

class Server {
public:
  Server(boost::asio::io_context &io, const ServeOptions &options,
         Metrics &metrics);
  /// Binds and starts accepting; the address it listens on.
  absl::StatusOr<boost::asio::ip::tcp::endpoint> listen();
  /// The models are loaded (main, then the fallback or null): ready.
  void ready(ServedModel *main, ServedModel *fallback);
  /// SIGTERM: stop accepting, let running requests finish within the
  /// drain time, then cancel them; the io context stops when all is done.
  void drain();

private:
  friend class Session;
  enum class State { Loading, Ready, Draining };

  /// The guards every /v1 request passes before its body is read: the
  /// state, the API key, the rate limit. `retryAfter` for a 429.
  std::optional<ApiError> admit(const std::string &authorization,
                                double &retryAfter);
  /// The model a request names (empty: the main one, or the fallback
  /// while the main queue is above 80% or the main device unhealthy).
  std::optional<ApiError> pick(const std::string &name, ServedModel *&model,
                               bool &fallback);
  /// GET /health: 200 when ready, else 503 and why.
  std::pair<int, std::string> health() const;
  std::string modelsList() const;
  void error(const ApiError &e); // counted by kind
  void accept();
  void checkDrained();

  boost::asio::io_context &io_;
  ServeOptions options_;
  Metrics &metrics_;
  RateLimiter limiter_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer drainTimer_;
  std::chrono::steady_clock::time_point drainDeadline_;
  bool cancelled_ = false; // the drain's deadline passed
  State state_ = State::Loading;
  ServedModel *main_ = nullptr, *fallback_ = nullptr;
  int64_t busy_ = 0; // responses not yet fully written
  int64_t created_;  // the server's start, for /v1/models
};

} // namespace kiln::serve

#endif // KILN_SERVE_SERVER_H
